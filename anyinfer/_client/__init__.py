"""The client: async and sync facades, instance configuration, routing, the attempt runner."""
