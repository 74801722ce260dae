"""The language model adapter: an :class:`~hsearch.llm.protocol.LLM` protocol, the
OpenAI-compatible client that speaks to any chat-completions endpoint, a scripted fake
for tests, and the local model server (llama.cpp) that ``hsearch run`` starts."""
