"""Loci plugged into other tools: the MCP server (stdio and streamable HTTP)."""
