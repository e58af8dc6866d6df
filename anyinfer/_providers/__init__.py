"""Built-in provider adapters, one module per wire protocol."""
