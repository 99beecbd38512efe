//! `yep-bench-rmcp`: the rmcp peer for yep-bench, an MCP server on stdio with one `echo` tool.
use rmcp::{
    ServerHandler, ServiceExt,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    tool, tool_handler, tool_router,
};

#[derive(serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct EchoArgs {
    text: String,
}

#[derive(Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    /// Reply with `{"echoed": text}` as one text content item.
    #[tool(description = "Echo the text back as {\"echoed\": text}")]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        serde_json::json!({ "echoed": text }).to_string()
    }
}

// The router is built once and kept: the macro's default rebuilds it on every call.
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = Echo {
        tool_router: Echo::tool_router(),
    };
    // The default is `stdio()`, the transport rmcp's own stdio examples use. `--pipes` selects
    // `stdio_pipes()`, which drives stdin/stdout on the reactor when both are pipes; the
    // harness reports both.
    if std::env::args().any(|a| a == "--pipes") {
        server
            .serve(rmcp::transport::stdio_pipes())
            .await?
            .waiting()
            .await?;
    } else {
        server
            .serve(rmcp::transport::stdio())
            .await?
            .waiting()
            .await?;
    }
    Ok(())
}
