// The TypeScript MCP SDK's Client, driven line by line by scripts/mcp_client_matrix.py:
//   node client.mjs '{"command": ..., "args": [...], "cwd": ...}'
// stdin: {"op": "tools"} | {"op": "call", "name": ..., "arguments": {...}}, one JSON per line;
// stdout: one JSON answer per line. The tool list is listed once at connection and kept, as
// an app does, replaced only by the SDK's own `listChanged` handler (autoRefresh, its default
// 300 ms debounce): what the model would see on its next turn.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const server = JSON.parse(process.argv[2]);
let tools = [];
const client = new Client(
  { name: "matrix-ts-client", version: "1.0.0" },
  {
    listChanged: {
      tools: {
        onChanged: (error, items) => {
          if (!error && items) tools = items;
        },
      },
    },
  },
);
const transport = new StdioClientTransport({
  command: server.command,
  args: server.args,
  cwd: server.cwd,
  stderr: "inherit",
});
await client.connect(transport);
tools = (await client.listTools()).tools;

const say = (answer) => process.stdout.write(JSON.stringify(answer) + "\n");
say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const request = JSON.parse(line);
  try {
    if (request.op === "tools") {
      say({ tools: tools.map((tool) => tool.name) });
    } else if (request.op === "call") {
      const result = await client.callTool(
        { name: request.name, arguments: request.arguments },
        undefined,
        { timeout: 30000 },
      );
      const text = (result.content || []).map((block) => block.text || "").join(" ");
      say({ isError: Boolean(result.isError), text });
    } else {
      say({ error: `unknown op ${request.op}` });
    }
  } catch (error) {
    say({ isError: true, text: String(error && error.message ? error.message : error) });
  }
}
await client.close();
