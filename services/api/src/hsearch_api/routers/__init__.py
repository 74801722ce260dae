"""HTTP routers: parse, call one service function, map the result."""
