"""Scripted client-side answers: a test of a tool that samples, elicits or reads the client's roots runs without a
model or a person.

    script = Scripted(sampling=["Paris"], elicitation=[{"name": "Ada"}, "decline"], roots=["file:///work"])
    async with Client(app, **script.client_options()) as client:
        ...
    script.sampling_requests[0].text          # what the server asked the model

An answer list is used in order, one answer per request; a single answer (not a list) answers every request; a
callable is called with the request's params and returns an answer. A request that finds no answer left is refused
with an error the server sees (and the test can read in :attr:`Scripted.problems`).

The answers work the same in both eras: a 2026-07-28 server asks through an ``input_required`` result, which the
client answers with the same handlers.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Iterable
from typing import Any

from ..client.handlers import ElicitationParams, SamplingParams
from ..protocol.errors import InternalError

_SHORT_ACTIONS = {"decline": {"action": "decline"}, "cancel": {"action": "cancel"}, "accept": {"action": "accept"}}


class ScriptExhausted(InternalError):
    """The server asked for more answers of one kind than the script holds (the client answers with this error)."""


class _Answers:
    """One kind of answer: a queue used in order, or one answer for every request."""

    def __init__(self, kind: str, answers: Any) -> None:
        self.kind = kind
        self.queue: deque[Any] = deque()
        self.always: Any = None
        self.repeat = False
        if isinstance(answers, (list, tuple, deque)):
            self.queue.extend(answers)
        else:
            self.always, self.repeat = answers, True

    def add(self, answers: Iterable[Any]) -> None:
        self.repeat = False
        self.queue.extend(answers)

    def next(self, asked: int) -> Any:
        if self.queue:
            return self.queue.popleft()
        if self.repeat:
            return self.always
        raise ScriptExhausted(
            f"the test's script has no {self.kind} answer left for request #{asked} (give more answers, e.g. "
            f"Scripted({self.kind}=[...]) or script.answer_{self.kind}(...))"
        )


class Scripted:
    """Canned answers for the requests a server sends its client.

    Args:
        sampling: answers to ``sampling/createMessage``: a string (an assistant text message), a
            ``CreateMessageResult`` (model or dict), a callable ``(SamplingParams) -> answer`` (sync or async), or an
            exception to raise (the server receives an error). None: the client declares no sampling capability.
        elicitation: answers to ``elicitation/create``: a dict of content (accepted), an ``ElicitResult`` (model or
            dict with ``action``), ``"decline"``, ``"cancel"`` or None (declined), a callable
            ``(ElicitationParams) -> answer``, or an exception. None (the argument): no elicitation capability.
        roots: the client's roots (URIs, dicts or ``Root`` models), or a callable returning them. None: no roots
            capability.

    A list of answers is used in order; anything else answers every request.
    """

    def __init__(self, *, sampling: Any = None, elicitation: Any = None, roots: Any = None) -> None:
        self._sampling = _Answers("sampling", sampling) if sampling is not None else None
        self._elicitation = _Answers("elicitation", elicitation) if elicitation is not None else None
        self.roots = roots
        #: every ``sampling/createMessage`` the server sent, in order (:class:`~mcpkit.SamplingParams`)
        self.sampling_requests: list[SamplingParams] = []
        #: every ``elicitation/create`` the server sent, in order (:class:`~mcpkit.ElicitationParams`)
        self.elicitation_requests: list[ElicitationParams] = []
        #: what went wrong on the client's side (a request with no answer left): one line each
        self.problems: list[str] = []

    # ------------------------------------------------------------------ adding answers

    def answer_sampling(self, *answers: Any) -> Scripted:
        """Queue sampling answers (after those given); turns sampling on. Returns the script."""
        if self._sampling is None:
            self._sampling = _Answers("sampling", [])
        self._sampling.add(answers)
        return self

    def answer_elicitation(self, *answers: Any) -> Scripted:
        """Queue elicitation answers (after those given); turns elicitation on. Returns the script."""
        if self._elicitation is None:
            self._elicitation = _Answers("elicitation", [])
        self._elicitation.add(answers)
        return self

    @property
    def sampling(self) -> bool:
        """Sampling is scripted (the client declares the capability)."""
        return self._sampling is not None

    @property
    def elicitation(self) -> bool:
        """Elicitation is scripted (the client declares the capability)."""
        return self._elicitation is not None

    @property
    def unused(self) -> dict[str, list[Any]]:
        """The queued answers no request used, by kind (empty lists when every answer was used)."""
        return {
            kind: list(answers.queue) if answers is not None else []
            for kind, answers in (("sampling", self._sampling), ("elicitation", self._elicitation))
        }

    # ------------------------------------------------------------------ the handlers

    async def _answer(self, answers: _Answers, params: Any, asked: int) -> Any:
        try:
            answer = answers.next(asked)
        except ScriptExhausted as exc:
            self.problems.append(str(exc))
            raise
        if callable(answer) and not isinstance(answer, type):
            answer = answer(params)
            if inspect.isawaitable(answer):
                answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def on_sampling(self, params: SamplingParams) -> Any:
        """The sampling handler: the next answer (a string becomes an assistant text message)."""
        assert self._sampling is not None
        self.sampling_requests.append(params)
        answer = await self._answer(self._sampling, params, len(self.sampling_requests))
        if isinstance(answer, str):
            return {"role": "assistant", "content": {"type": "text", "text": answer}, "model": "scripted"}
        return answer

    async def on_elicitation(self, params: ElicitationParams) -> Any:
        """The elicitation handler: the next answer (``"decline"``/``"cancel"`` as the action, a dict of content
        accepted, None declined)."""
        assert self._elicitation is not None
        self.elicitation_requests.append(params)
        answer = await self._answer(self._elicitation, params, len(self.elicitation_requests))
        if isinstance(answer, str):
            if answer not in _SHORT_ACTIONS:
                raise ValueError(f"an elicitation answer string is 'decline', 'cancel' or 'accept', not {answer!r}")
            return dict(_SHORT_ACTIONS[answer])
        return answer

    def client_options(self) -> dict[str, Any]:
        """The ``Client`` options that install this script: ``sampling_handler``, ``elicitation_handler`` and
        ``roots`` for what it scripts (a capability is declared only for those)."""
        options: dict[str, Any] = {}
        if self._sampling is not None:
            options["sampling_handler"] = self.on_sampling
        if self._elicitation is not None:
            options["elicitation_handler"] = self.on_elicitation
        if self.roots is not None:
            options["roots"] = self.roots
        return options

    def assert_all_used(self) -> None:
        """Fail (``AssertionError``) when a queued answer was not asked for, or a request found none."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        left = {kind: answers for kind, answers in self.unused.items() if answers}
        if self.problems or left:
            lines = [*self.problems, *(f"{len(a)} {kind} answer(s) never asked for: {a!r}" for kind, a in left.items())]
            raise AssertionError("the script and the server disagree:\n  " + "\n  ".join(lines))


__all__ = ["ScriptExhausted", "Scripted"]
