"""The MCP server (Model Context Protocol): hsearch as tools a model can call.

``tools`` (the tools, their inputs from the API's request models, their results), ``local``
(the tools on the services the routers call: the API's ``/mcp`` endpoint) and ``remote``
(the tools over the API's HTTP interface: ``hsearch mcp``, stdio). docs/mcp.md.
"""
