"""Local models: hardware detection, the local catalog and fit, acquisition, the store."""
