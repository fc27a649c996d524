"""A FastAPI app that ``MCPKit.from_fastapi`` serves in the OpenAPI in-process tests: ``build_api(events)``.

Its lifespan appends ``"startup"`` and ``"shutdown"`` to ``events`` (and to the file ``events_file`` when given, for
a server in a subprocess) and yields the state ``{"greeting": "hello"}``, which requests read back. ``/stream`` is an
endless answer: ``app.state.stream`` counts the chunks it made and says whether it was stopped. ``/me`` checks the
``Authorization`` header itself (an API that trusts the same tokens as the MCP server, for ``forward_headers``).
``/signup/{user}`` answers at once and welcomes the user in the background (FastAPI's ``BackgroundTasks``) after
``delay`` seconds: ``app.state.welcomed`` lists the users welcomed, and ``"cancelled <user>"`` for work cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import BackgroundTasks, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

SHARED_TOKEN = "Bearer shared-token"


class ItemIn(BaseModel):
    name: str
    price: float


class Item(ItemIn):
    id: int


def build_api(
    events: list[str] | None = None, events_file: str | Path | None = None, *, fail_startup: bool = False
) -> FastAPI:
    """A fresh API with two items; ``fail_startup`` makes its lifespan's startup raise."""
    log = events if events is not None else []

    def record(event: str) -> None:
        log.append(event)
        if events_file is not None:
            with open(events_file, "a") as f:
                f.write(event + "\n")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        if fail_startup:
            raise RuntimeError("the item database is down")
        record("startup")
        yield {"greeting": "hello"}
        record("shutdown")

    app = FastAPI(title="Items", version="1.0.0", lifespan=lifespan)
    items = {1: Item(id=1, name="cup", price=2.5), 2: Item(id=2, name="pot", price=9.0)}
    stream: dict[str, Any] = {"chunks": 0, "stopped": False}
    app.state.stream = stream
    app.state.events = log
    welcomed: list[str] = []
    app.state.welcomed = welcomed

    @app.get("/items/{item_id}", operation_id="getItem")
    def get_item(item_id: int, currency: Annotated[str, Query()] = "EUR") -> dict[str, Any]:
        if item_id not in items:
            raise HTTPException(404, f"no item {item_id}")
        return {**items[item_id].model_dump(), "currency": currency}

    @app.post("/items", operation_id="addItem", status_code=201)
    def add_item(item: ItemIn) -> Item:
        made = Item(id=max(items) + 1, **item.model_dump())
        items[made.id] = made
        return made

    @app.get("/greeting", operation_id="greeting")
    def greeting(request: Request) -> dict[str, str]:
        return {"greeting": request.state.greeting}  # (what the lifespan yielded)

    @app.get("/me", operation_id="me")
    def me(authorization: Annotated[str | None, Header()] = None) -> dict[str, str]:
        if authorization != SHARED_TOKEN:
            raise HTTPException(401, "a valid bearer token is needed")
        return {"user": "alice"}

    @app.post("/signup/{user}", operation_id="signup")
    def signup(user: str, background: BackgroundTasks, delay: float = 0.05) -> dict[str, str]:
        async def welcome() -> None:
            try:
                await asyncio.sleep(delay)  # (work after the answer, as a mail sent in the background)
            except asyncio.CancelledError:
                welcomed.append(f"cancelled {user}")
                raise
            welcomed.append(user)

        background.add_task(welcome)
        return {"user": user}

    @app.get("/boom", operation_id="boom")
    def boom() -> dict[str, str]:
        raise ValueError("a bug in the API")

    @app.get("/stream", operation_id="stream")
    async def endless() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            try:
                yield b'{"data": "'
                while True:
                    stream["chunks"] += 1
                    yield b"x" * 1024
                    await asyncio.sleep(0)
            finally:
                stream["stopped"] = True

        return StreamingResponse(chunks(), media_type="application/json")

    return app


def build_prefixed_api(**options: Any) -> FastAPI:
    """An API whose one route says where the request reached it: ``GET /where`` answers the request's URL path,
    the scope's ``path`` and its ``root_path``. ``options`` go to ``FastAPI`` (``root_path=``, ``servers=``)."""
    api = FastAPI(title="Prefixed", version="1", **options)

    @api.get("/where", operation_id="where")
    async def where(request: Request) -> dict[str, str]:
        return {"url": request.url.path, "path": request.scope["path"], "root_path": request.scope["root_path"]}

    return api
