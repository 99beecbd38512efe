//! Typed tools: the handshake carries the schemas derived from the handler's types, bad
//! arguments are answered with errors that name the field, and the raw form still works.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use yep_sdk::Server;

#[derive(Deserialize, JsonSchema)]
enum Units {
    #[serde(rename = "metric")]
    Metric,
    #[serde(rename = "imperial")]
    Imperial,
}

#[derive(Deserialize, JsonSchema)]
struct Place {
    lat: f64,
    lon: f64,
}

#[derive(Deserialize, JsonSchema)]
struct Forecast {
    /// The city to forecast.
    city: String,
    #[serde(default)]
    days: Option<u32>,
    units: Option<Units>,
    #[serde(default)]
    near: Vec<Place>,
}

#[derive(Serialize, JsonSchema)]
struct Report {
    city: String,
    days: u32,
}

fn server() -> Server {
    Server::new("wx")
        .typed_tool("forecast", "The weather for a city", |a: Forecast, _ctx| {
            let near: f64 = a.near.iter().map(|p| p.lat + p.lon).sum();
            let imperial = matches!(a.units, Some(Units::Imperial));
                Ok(json!({"city": a.city, "days": a.days.unwrap_or(3), "near": near, "imperial": imperial}))
        })
        .typed_tool_with_output("report", "A typed result", |a: Forecast, _ctx| {
            Ok(Report {
                city: a.city,
                days: a.days.unwrap_or(1),
            })
        })
        .tool("raw", |args, _ctx| Ok(json!({"raw": args})))
}

/// Send `lines` to a server, close its input, and read every answer by id.
fn exchange(lines: &[Value]) -> Vec<Value> {
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let thread = std::thread::spawn(move || server().serve_on(in_r, out_w));
    for l in lines {
        writeln!(in_w, "{l}").unwrap();
    }
    drop(in_w);
    let mut answers: Vec<Value> = BufReader::new(out_r)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .filter(|v: &Value| v.get("method").is_none())
        .collect();
    thread.join().unwrap().unwrap();
    answers.sort_by_key(|v| v["id"].as_u64());
    answers
}

fn call(id: u64, name: &str, args: Value) -> Value {
    json!({"id": id, "method": "tool/call", "params": {"name": name, "args": args}})
}

#[test]
fn the_handshake_carries_the_schemas_derived_from_the_types() {
    let answers = exchange(&[
        json!({"id": 1, "method": "initialize", "params": {"protocol_version": "1.0"}}),
    ]);
    let tools = &answers[0]["result"]["capability_params"]["tools"];
    let forecast_schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city to forecast."},
            "days": {"type": ["integer", "null"], "format": "uint32", "minimum": 0, "default": null},
            "units": {"anyOf": [{"$ref": "#/$defs/Units"}, {"type": "null"}]},
            "near": {"type": "array", "items": {"$ref": "#/$defs/Place"}}
        },
        "required": ["city"],
        "$defs": {
            "Units": {"type": "string", "enum": ["metric", "imperial"]},
            "Place": {
                "type": "object",
                "properties": {"lat": {"type": "number", "format": "double"}, "lon": {"type": "number", "format": "double"}},
                "required": ["lat", "lon"]
            }
        }
    });
    assert_eq!(
        tools,
        &json!([
            {"name": "forecast", "description": "The weather for a city", "schema": forecast_schema},
            {"name": "raw"},
            {"name": "report", "description": "A typed result", "schema": forecast_schema, "output_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer", "format": "uint32", "minimum": 0}},
                "required": ["city", "days"]
            }}
        ]),
        "{tools:#}"
    );
}

#[test]
fn typed_calls_get_their_arguments_and_bad_ones_an_error_naming_the_field() {
    let answers = exchange(&[
        call(
            2,
            "forecast",
            json!({"city": "Oslo", "near": [{"lat": 1.5, "lon": 2.0}], "units": "imperial"}),
        ),
        call(3, "forecast", json!({"days": 2})),
        call(4, "forecast", json!({"city": "Oslo", "days": "two"})),
        call(
            5,
            "forecast",
            json!({"city": "Oslo", "near": [{"lat": 1.0, "lon": "x"}]}),
        ),
        call(6, "forecast", json!({"city": "Oslo", "units": "kelvin"})),
        call(7, "report", json!({"city": "Bergen"})),
        call(8, "raw", json!({"anything": [1, 2]})),
        call(9, "forecast", Value::Null),
    ]);
    assert_eq!(
        answers[0]["result"],
        json!({"city": "Oslo", "days": 3, "near": 3.5, "imperial": true})
    );
    let error = |i: usize| {
        assert_eq!(answers[i]["error"]["code"], -32602, "{}", answers[i]);
        answers[i]["error"]["message"].as_str().unwrap().to_string()
    };
    assert_eq!(
        error(1),
        "invalid arguments for `forecast`: missing field `city`"
    );
    assert!(
        error(2)
            .starts_with("invalid arguments for `forecast`: `days`: invalid type: string \"two\""),
        "{}",
        error(2)
    );
    assert!(
        error(3).starts_with("invalid arguments for `forecast`: `near[0].lon`: invalid type"),
        "{}",
        error(3)
    );
    assert!(
        error(4).starts_with("invalid arguments for `forecast`: `units`: unknown variant `kelvin`"),
        "{}",
        error(4)
    );
    assert_eq!(answers[5]["result"], json!({"city": "Bergen", "days": 1}));
    assert_eq!(answers[6]["result"], json!({"raw": {"anything": [1, 2]}}));
    // No arguments at all read as an empty object: the missing field is named.
    assert_eq!(
        error(7),
        "invalid arguments for `forecast`: missing field `city`"
    );
}
