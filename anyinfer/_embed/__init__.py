"""Embeddings as a first-class operation.

`anyinfer._embed._types` holds the public result (`Embeddings`) and the adapter-side
request and reply (`EmbedRequest`, `EmbedReply`); `anyinfer._embed._wire` the wire
formats the built-in adapters speak (OpenAI's `/embeddings`, Ollama's `/api/embed`);
`anyinfer._embed._runner` the client side: the vector-space rule, batching, and the
route walk (retries, breakers, fallbacks) for each batch.
"""
