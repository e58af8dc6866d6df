"""A correct third-party adapter built on the official `openai` SDK.

`SDKChatAdapter` is what an author outside AnyInfer would write: it sends through
`openai.AsyncOpenAI` and turns the SDK's parsed chunks into parts. It is registered
through the documented `pytest_anyinfer_configure` hook by the pytester test in
`tests/harness/test_conformance_sdk_adapter.py`, and must pass the whole conformance suite.
"""

from __future__ import annotations

from .adapter import SDKChatAdapter

__all__ = ["SDKChatAdapter"]
