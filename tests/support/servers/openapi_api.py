"""A small REST API (FastAPI) that the OpenAPI tests turn into MCP servers: ``build_api()`` is the ASGI app, its
``/openapi.json`` an OpenAPI 3.1 document; ``OPENAPI_30`` describes the same routes in OpenAPI 3.0.

Every request it receives is recorded in ``app.state.seen`` (method, raw path, query, headers), so a test can tell
exactly what reached it and what did not.
"""

import asyncio
from typing import Annotated, Any

from fastapi import Cookie, Depends, FastAPI, Form, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, Field

API_KEY = "k-123"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class PetIn(BaseModel):
    name: str = Field(description="The pet's name", min_length=1)
    tag: str | None = None
    age: int | None = Field(default=None, ge=0)


class Pet(PetIn):
    id: int


class Stats(BaseModel):
    count: int
    names: list[str]


def build_api() -> FastAPI:
    """A fresh API with three pets."""
    app = FastAPI(title="Pet Store", version="1.0.0")
    pets: dict[int, Pet] = {
        1: Pet(id=1, name="Rex", tag="dog", age=3),
        2: Pet(id=2, name="Tom", tag="cat", age=5),
        3: Pet(id=3, name="Nemo", tag="fish", age=1),
    }
    seen: list[dict[str, Any]] = []
    app.state.seen = seen
    key_header = APIKeyHeader(name="X-API-Key", auto_error=False)

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        seen.append(
            {
                "method": request.method,
                "path": request.scope.get("raw_path", b"").decode("latin-1"),
                "query": request.url.query,
                "headers": {k.lower(): v for k, v in request.headers.items()},
            }
        )
        return await call_next(request)

    @app.get("/pets", operation_id="listPets", tags=["pets"], summary="List pets")
    def list_pets(
        limit: Annotated[int, Query(ge=1, le=100, description="How many at most")] = 10,
        tag: Annotated[list[str] | None, Query(description="Only these tags")] = None,
    ) -> list[Pet]:
        found = [p for p in pets.values() if not tag or p.tag in tag]
        return found[:limit]

    @app.post("/pets", operation_id="createPet", tags=["pets"], status_code=201, summary="Add a pet")
    def create_pet(pet: PetIn) -> Pet:
        new = Pet(id=max(pets, default=0) + 1, **pet.model_dump())
        pets[new.id] = new
        return new

    @app.get("/pets/{pet_id}", operation_id="getPet", tags=["pets"], summary="One pet")
    def get_pet(pet_id: int) -> Pet:
        if pet_id not in pets:
            raise HTTPException(404, f"no pet {pet_id}")
        return pets[pet_id]

    @app.put("/pets/{pet_id}", operation_id="updatePet", tags=["pets"])
    def update_pet(pet_id: int, pet: PetIn) -> Pet:
        if pet_id not in pets:
            raise HTTPException(404, f"no pet {pet_id}")
        pets[pet_id] = Pet(id=pet_id, **pet.model_dump())
        return pets[pet_id]

    @app.delete("/pets/{pet_id}", operation_id="deletePet", tags=["pets", "admin"], status_code=204)
    def delete_pet(pet_id: int) -> Response:
        pets.pop(pet_id, None)
        return Response(status_code=204)

    @app.get("/stats", operation_id="stats", tags=["pets"])
    def stats() -> Stats:
        return Stats(count=len(pets), names=sorted(p.name for p in pets.values()))

    @app.get("/files/{name:path}", operation_id="getFile")
    def get_file(name: str) -> dict[str, str]:
        return {"name": name}

    @app.get("/whoami", operation_id="whoami", tags=["auth"])
    def whoami(key: Annotated[str | None, Depends(key_header)]) -> dict[str, bool]:
        if key != API_KEY:
            raise HTTPException(401, "missing or wrong API key")
        return {"key_ok": True}

    @app.get("/echo", operation_id="echo")
    def echo(
        x_trace: Annotated[str | None, Header(description="A trace label")] = None,
        session: Annotated[str | None, Cookie()] = None,
    ) -> dict[str, str | None]:
        return {"trace": x_trace, "session": session}

    @app.post("/notes", operation_id="addNote")
    def add_note(title: Annotated[str, Form()], body: Annotated[str, Form()] = "") -> dict[str, str]:
        return {"title": title, "body": body}

    @app.get("/text", operation_id="text", response_class=PlainTextResponse)
    def text() -> str:
        return "plain words"

    @app.get("/image", operation_id="image", responses={200: {"content": {"image/png": {}}}})
    def image() -> Response:
        return Response(PNG, media_type="image/png")

    @app.get("/big", operation_id="big")
    def big() -> dict[str, str]:
        return {"blob": "x" * (5 * 1024 * 1024)}

    @app.get("/slow", operation_id="slow")
    async def slow() -> dict[str, bool]:
        await asyncio.sleep(10)
        return {"done": True}

    @app.get("/drip", operation_id="drip")
    async def drip() -> Response:
        from fastapi.responses import StreamingResponse

        async def chunks() -> Any:
            for _ in range(100):
                yield b" "
                await asyncio.sleep(0.2)

        return StreamingResponse(chunks(), media_type="application/json")

    @app.get("/away", operation_id="away")
    def away() -> RedirectResponse:
        return RedirectResponse("http://203.0.113.9/elsewhere", status_code=302)

    @app.get("/liar", operation_id="liar")
    def liar() -> JSONResponse:
        return JSONResponse({"count": "not a number", "names": []})

    return app


def liar_documented_as_stats(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with ``/liar`` documented as answering :class:`Stats` (it does not)."""
    ok = spec["paths"]["/liar"]["get"]["responses"]["200"]
    ok["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/Stats"}}}
    return spec


#: The same routes described in OpenAPI 3.0 (nullable, a boolean exclusiveMinimum, example, a form body).
OPENAPI_30: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Pet Store 3.0", "version": "1.0.0"},
    "components": {
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}},
        "parameters": {
            "PetId": {"name": "pet_id", "in": "path", "required": True, "schema": {"type": "integer"}},
        },
        "schemas": {
            "PetIn": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "example": "Rex"},
                    "tag": {"type": "string", "nullable": True},
                    "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": False, "nullable": True},
                },
            },
            "Pet": {
                "allOf": [
                    {"$ref": "#/components/schemas/PetIn"},
                    {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer", "readOnly": True}}},
                ]
            },
        },
    },
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "tags": ["pets"],
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 100},
                    },
                    {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                ],
                "responses": {
                    "200": {
                        "description": "pets",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}
                            }
                        },
                    }
                },
            },
            "post": {
                "operationId": "createPet",
                "tags": ["pets"],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PetIn"}}},
                },
                "responses": {
                    "201": {
                        "description": "made",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
                    }
                },
            },
        },
        "/pets/{pet_id}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "get": {
                "operationId": "getPet",
                "responses": {
                    "200": {
                        "description": "a pet",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
                    },
                    "404": {"description": "none"},
                },
            },
        },
        "/whoami": {
            "get": {
                "operationId": "whoami",
                "security": [{"key": []}],
                "parameters": [{"name": "X-API-Key", "in": "header", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/notes": {
            "post": {
                "operationId": "addNote",
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "required": ["title"],
                                "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
                            }
                        }
                    }
                },
                "responses": {"200": {"description": "the note"}},
            }
        },
    },
}
