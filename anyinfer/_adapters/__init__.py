"""The adapter layer: the HTTP adapter template, error classification, profiles, the registry."""
