"""The telemetry hub: which observers a client has, and delivering events to them.

Kept apart from the event classes (`anyinfer._telemetry`) so that a client nobody
observes never loads them: every client has a hub, but events are built, and their
module imported, only once an observer is subscribed.

`Emitter` is what every request's instrument starts from (generation's
`_client.instrument.Instrument`, embed's and rerank's `_embed._observe.UnaryInstrument`),
and `report_nothing` is every event method of their silent twins, the instruments of
requests nobody observes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._redact import redact

if TYPE_CHECKING:
    from ._telemetry import Observer, TelemetryEvent

__all__ = ["Emitter", "Telemetry", "report_nothing"]

logger = logging.getLogger("anyinfer")


class _Subscription:
    __slots__ = ("logged", "observer", "payloads")

    def __init__(self, observer: Observer, payloads: bool) -> None:
        self.observer = observer
        self.payloads = payloads
        self.logged: set[type[BaseException]] = set()


class Telemetry:
    """Delivers telemetry events to subscribed observers.

    Cheap when nobody listens: `emit` takes a factory and builds nothing unless an
    observer is subscribed. Subscribing and unsubscribing are thread-safe and take
    effect for the next event.

    Args:
        observers: Observers to subscribe payload-free from the start.
    """

    def __init__(self, observers: Sequence[Observer] = ()) -> None:
        self._lock = threading.Lock()
        self._subs: tuple[_Subscription, ...] = ()
        for observer in observers:
            self.subscribe(observer)

    @property
    def active(self) -> bool:
        """Whether any observer is subscribed."""
        return bool(self._subs)

    @property
    def wants_payloads(self) -> bool:
        """Whether any subscribed observer asked for payloads."""
        return any(s.payloads for s in self._subs)

    def subscribe(self, observer: Observer, *, payloads: bool = False) -> None:
        """Register an observer; subscribing one again updates its `payloads` choice.

        Raises:
            TypeError: If `observer` has no `on_event` method.
        """
        if not callable(getattr(observer, "on_event", None)):
            raise TypeError(f"{type(observer).__name__} is not an Observer (no on_event method)")
        with self._lock:
            subs = [s for s in self._subs if s.observer is not observer]
            subs.append(_Subscription(observer, payloads))
            self._subs = tuple(subs)

    def unsubscribe(self, observer: Observer) -> None:
        """Remove an observer; removing one that is not subscribed does nothing."""
        with self._lock:
            self._subs = tuple(s for s in self._subs if s.observer is not observer)

    def emit(self, factory: Callable[[], TelemetryEvent]) -> None:
        """Build an event and deliver it to every observer.

        Args:
            factory: Builds the full event (payload fields filled in). Called only when
                an observer is subscribed, and at most once.
        """
        if self._subs:
            self.deliver(factory())

    def deliver(self, event: TelemetryEvent) -> None:
        """Deliver a built event to every observer (payloads stripped for those that did
        not ask for them).

        Args:
            event: The full event (payload fields filled in).
        """
        from ._telemetry import with_payloads, without_payloads

        subs = self._subs
        full: TelemetryEvent | None = None
        bare: TelemetryEvent | None = None
        for sub in subs:
            if sub.payloads:
                if full is None:
                    full = with_payloads(event)
                delivered = full
            else:
                if bare is None:
                    bare = without_payloads(event)
                delivered = bare
            try:
                sub.observer.on_event(delivered)
            except Exception as exc:
                self._contain(sub, exc)

    @staticmethod
    def _contain(sub: _Subscription, exc: Exception) -> None:
        kind = type(exc)
        if kind in sub.logged:
            return
        sub.logged.add(kind)
        logger.warning(
            "telemetry observer %s raised %s: %s (ignored; further %s errors from this "
            "observer are not logged)",
            type(sub.observer).__name__,
            kind.__name__,
            redact(str(exc)),
            kind.__name__,
        )


class Emitter:
    """One observed request's link to the observers: the hub, the caller's metadata
    (every event carries it) and the request id, drawn when the request starts.

    Args:
        telemetry: The client's observer hub.
        metadata: The caller's metadata for the request.
    """

    __slots__ = ("_metadata", "_request_id", "_telemetry")

    def __init__(self, telemetry: Telemetry, metadata: Mapping[str, str]) -> None:
        from ._telemetry import new_request_id

        self._telemetry = telemetry
        self._metadata = metadata
        self._request_id = new_request_id()

    def _emit(self, event: TelemetryEvent) -> None:
        self._telemetry.deliver(event)


def report_nothing(self: object, *args: Any, **kwargs: Any) -> None:
    """Nothing to report: every event method of a silent instrument, which is built for
    a request nobody observes and so builds no event and draws no request id."""
