#!/usr/bin/env python3
# Regenerates the Methods and Payloads sections of docs/protocol.md from schema/yep/v1/.
# Run from the repo root: python3 scripts/gen-protocol-doc.py
import json
meta=json.load(open('schema/yep/v1/meta.json'))
schema=json.load(open('schema/yep/v1/schema.json'))
out=[]
out.append("\n## Methods\n")
out.append("Generated from `schema/yep/v1/meta.json` and `schema.json`; a test checks this page against them.\n")
out.append("| Method | Direction | Kind | Params | Result |\n|---|---|---|---|---|")
def ref(x): return x.get('$ref','').split('/')[-1] if isinstance(x,dict) else ''
def code(x): return ('`'+x+'`') if x else '—'
for m in meta['methods']:
    msg=schema['messages'].get(m['name'],{})
    p=ref(msg.get('params',{})); r=ref(msg.get('result',{}))
    d='host → server' if m['direction']=='host' else 'server → host'
    out.append("| `%s` | %s | %s | %s | %s |" % (m['name'], d, m['kind'], code(p), code(r)))
out.append("\n`shutdown` answers `{}`; `initialized` and `exit` carry no params. `tool/call` answers the tool's result value as is. Capability tokens: " + ", ".join("`%s`" % c for c in meta['capabilities']) + ".\n")
out.append("## Payloads\n")
out.append("Every field is optional unless marked required; a missing field takes the default shown.\n")
for name,d in sorted(schema['$defs'].items()):
    out.append("### `%s`\n" % name)
    if 'enum' in d:
        out.append("One of: " + ", ".join("`%s`" % v for v in d['enum']) + ".\n")
        continue
    props=d.get('properties',{})
    req=set(d.get('required',[]))
    if not props:
        out.append("(no fields)\n"); continue
    out.append("| Field | Type | Default |\n|---|---|---|")
    for f,ps in props.items():
        if not isinstance(ps,dict):
            t='any'; ps={}
        elif 'type' in ps:
            t=ps['type']; t=' or '.join(t) if isinstance(t,list) else t
            if t=='array' and isinstance(ps.get('items'),dict): t += ' of ' + (ref(ps['items']) or ps['items'].get('type','any'))
        elif '$ref' in ps: t=ref(ps)
        elif 'anyOf' in ps: t=' or '.join(ref(x) or x.get('type','') for x in ps['anyOf'])
        else: t='any'
        dflt = 'required' if f in req else (json.dumps(ps['default']) if 'default' in ps else '—')
        out.append("| `%s` | %s | %s |" % (f, t, dflt.replace('|', '\\|')))
    out.append("")
text=open('docs/protocol.md').read()
marker="\n## Methods\n"
if marker in text:
    text=text[:text.index(marker)]
open('docs/protocol.md','w').write(text.rstrip()+"\n"+"\n".join(out)+"\n")
