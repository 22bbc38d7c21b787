// The TypeScript MCP SDK's McpServer as an upstream: each tool fails one way a real tool does,
// so the gateway's tests see what a client receives from the SDK's own error handling.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { McpError, ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const server = new McpServer({ name: "ts-upstream", version: "1.0.0" });
const text = { text: z.string() };

server.tool("crash", text, async ({ text }) => {
  const missing = undefined;
  return { content: [{ type: "text", text: missing.field + text }] }; // a bug: a TypeError
});
server.tool("refuse", text, async ({ text }) => {
  throw new Error(`no results for '${text}'`);
});
server.tool("backend_down", text, async () => {
  throw new Error("search backend answered 503 Service Unavailable");
});
server.tool("connection_refused", text, async () => {
  const error = new Error("connect ECONNREFUSED 127.0.0.1:9");
  error.code = "ECONNREFUSED";
  throw error;
});
server.tool("mcperror", text, async () => {
  throw new McpError(ErrorCode.InternalError, "the index is being rebuilt");
});
server.tool("count", { n: z.number().int() }, async ({ n }) => ({
  content: [{ type: "text", text: String(n) }],
}));
server.tool("exit_process", text, async () => process.exit(1));
server.tool("echo", text, async ({ text }) => ({ content: [{ type: "text", text: `ts:${text}` }] }));

await server.connect(new StdioServerTransport());
