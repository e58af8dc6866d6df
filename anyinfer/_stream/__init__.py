"""The provider-neutral event stream: parts, events, the attempt state machine, the handle."""
