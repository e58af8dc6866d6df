"""Structured output (schemas, the repair loop) and tools."""
