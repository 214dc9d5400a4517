"""The Model Context Protocol server (`memsvc mcp`): memsvc's agent-facing tools for MCP agents."""
