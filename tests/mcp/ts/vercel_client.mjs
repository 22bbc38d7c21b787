// The Vercel AI SDK's MCP client (`createMCPClient` from @ai-sdk/mcp), driven line by line by
// scripts/mcp_client_matrix.py exactly as client.mjs is:
//   node vercel_client.mjs '{"command": ..., "args": [...], "cwd": ...}'
// The tool set is built once by `client.tools()` (a tools/list), as an app builds it for a
// `generateText` call and keeps it for every step of that call; the client has no handler for
// list_changed. A call goes through the tool's own `execute`, as the AI SDK's loop makes it.
import { createInterface } from "node:readline";
import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

const server = JSON.parse(process.argv[2]);
const client = await createMCPClient({
  transport: new Experimental_StdioMCPTransport({
    command: server.command,
    args: server.args,
    cwd: server.cwd,
  }),
});
const tools = await client.tools();

const say = (answer) => process.stdout.write(JSON.stringify(answer) + "\n");
say({ ready: true });
let calls = 0;
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const request = JSON.parse(line);
  try {
    if (request.op === "tools") {
      say({ tools: Object.keys(tools) });
    } else if (request.op === "call") {
      calls += 1;
      const result = await tools[request.name].execute(request.arguments, {
        toolCallId: `call-${calls}`,
        messages: [],
      });
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
