"""Per-response bookkeeping every adapter needs, written once.

A `PartAssembler` serves one response. The adapter's frame decoder asks it for the
tool-call slot of the provider's own key (OpenAI's `index`, a Responses item id or
`output_index`, an Anthropic content-block index, or nothing at all for protocols
that send calls whole) and builds its tool-call, finish and warning parts through it;
`HTTPAdapter.stream_parts` passes every part through `fix`. What it owns:

- **Slots.** Each new key gets the next slot, 0, 1, …; a known key keeps its slot.
- **Header dedupe.** With `dedupe_headers`, a call id or name already yielded for a slot
  is not yielded again, and a fragment that says nothing new is dropped.
- **Finish reconciliation.** With `tool_finish`, a `stop` finish of a response that made
  tool calls is `tool_calls` (Gemini, Ollama and the Responses API say `stop` or
  `completed` then), also when a call arrives after the finish.
- **Warning dedupe.** `warn_once` (and, with `dedupe_warnings`, `fix` for every warning)
  drops a warning text already given.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator

from .._stream.parts import FinishPart, Part, ToolCallPart, WarningPart

__all__ = ["PartAssembler"]


class PartAssembler:
    """Tool-call slots, finish reconciliation and warning dedupe for one response.

    Args:
        tool_finish: Turn a `stop` finish into `tool_calls` when the response made calls.
        dedupe_headers: Yield each slot's call id and name once.
        dedupe_warnings: Let `fix` drop every repeated warning text.

    Attributes:
        finish: The last finish reason seen by `fix` (after reconciliation), or `None`.
    """

    __slots__ = (
        "_dedupe_headers",
        "_dedupe_warnings",
        "_named",
        "_opened",
        "_slots",
        "_tool_finish",
        "_warned",
        "_with_id",
        "finish",
    )

    def __init__(
        self,
        *,
        tool_finish: bool = False,
        dedupe_headers: bool = False,
        dedupe_warnings: bool = False,
    ) -> None:
        self._tool_finish = tool_finish
        self._dedupe_headers = dedupe_headers
        self._dedupe_warnings = dedupe_warnings
        self._slots: dict[Hashable, int] = {}
        self._opened: set[int] = set()
        self._with_id: set[int] = set()
        self._named: set[int] = set()
        self._warned: set[str] = set()
        self.finish: str | None = None

    # --- slots -----------------------------------------------------------------------

    @property
    def calls(self) -> int:
        """How many tool-call slots the response has opened."""
        return len(self._slots)

    def slot(self, key: Hashable | None = None) -> int:
        """The slot of the call the provider names `key` (`None`: a new call)."""
        if key is None:
            key = ("#", len(self._slots))
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = len(self._slots)
        return slot

    def known(self, key: Hashable) -> int | None:
        """The slot of `key` if a call opened it, else `None`."""
        return self._slots.get(key)

    def call(
        self,
        key: Hashable | None,
        call_id: str | None,
        name: str | None,
        fragment: str,
    ) -> Iterator[Part]:
        """The part for a tool-call fragment of the call the provider names `key`.

        Args:
            key: The provider's key for the call (`None`: a whole call of its own).
            call_id: The call id, when this fragment carries it.
            name: The function name, when this fragment carries it.
            fragment: Argument text.
        """
        slot = self.slot(key)
        if self._dedupe_headers:
            new_slot = slot not in self._opened
            new_id = bool(call_id) and slot not in self._with_id
            new_name = bool(name) and slot not in self._named
            self._opened.add(slot)
            if new_id:
                self._with_id.add(slot)
            if new_name:
                self._named.add(slot)
            if not (new_slot or new_id or new_name or fragment):
                return
            call_id = call_id if new_id else None
            name = name if new_name else None
        yield ToolCallPart(slot, call_id, name, fragment)

    # --- warnings ----------------------------------------------------------------------

    def warn_once(self, text: str) -> Iterator[Part]:
        """A `WarningPart` for `text`, unless the response already warned so."""
        if text not in self._warned:
            self._warned.add(text)
            yield WarningPart(text)

    # --- the filter ------------------------------------------------------------------

    def fix(self, parts: Iterable[Part]) -> Iterator[Part]:
        """`parts` with the finish reconciled and (with `dedupe_warnings`) warnings deduped."""
        out: list[Part] = []
        for part in parts:
            self.fix_into(part, out)
            yield from out
            out.clear()

    def fix_into(self, part: Part, out: list[Part]) -> None:
        """Append `part` to `out` as `fix` passes it: reconciled, deduped or dropped.

        A tool call after a `stop` finish (with `tool_finish`) appends the call and then
        the `tool_calls` finish it makes.
        """
        cls = type(part)
        if cls is FinishPart:
            reason = part.reason  # type: ignore[union-attr]
            if self._tool_finish and reason == "stop" and self._slots:
                part = FinishPart(reason := "tool_calls")
            self.finish = reason
        elif cls is WarningPart and self._dedupe_warnings:
            text = part.text  # type: ignore[union-attr]
            if text in self._warned:
                return
            self._warned.add(text)
        elif cls is ToolCallPart and self._tool_finish and self.finish == "stop":
            # A call after a `stop` finish still makes it a tool-calls finish.
            out.append(part)
            self.finish = "tool_calls"
            part = FinishPart("tool_calls")
        out.append(part)
