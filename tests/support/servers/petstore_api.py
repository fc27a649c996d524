"""An API shaped like the Swagger Petstore 3 (``swagger-api/swagger-petstore``), for the OpenAPI tests: its
document (``DOCUMENT``, OpenAPI 3.0) has a relative server URL (``/v3``) and answers documented as XML *and*
JSON (XML first, as the Petstore writes them); ``build_api()`` serves them under ``/v3``, answering JSON or XML as
the request's ``Accept`` asks (``findPetsByStatus`` answers XML whatever is asked: an API that ignores
``Accept``). Every request's ``Accept`` is recorded in ``app.state.accepts``.
"""

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

PETS: dict[int, dict[str, Any]] = {
    10: {"id": 10, "name": "doggie", "status": "available", "photoUrls": ["p.png"]},
}


def _xml(pet: dict[str, Any]) -> str:
    return f"<Pet><id>{pet['id']}</id><name>{pet['name']}</name><status>{pet['status']}</status></Pet>"


def build_api() -> Starlette:
    """The API, its routes under ``/v3``."""
    accepts: list[str | None] = []

    async def get_pet(request: Request) -> Response:
        accepts.append(request.headers.get("accept"))
        pet = PETS.get(int(request.path_params["pet_id"]))
        if pet is None:
            return Response("Pet not found", status_code=404)
        if "application/json" in (request.headers.get("accept") or ""):
            return JSONResponse(pet)
        return Response(_xml(pet), media_type="application/xml")

    async def find_by_status(request: Request) -> Response:
        accepts.append(request.headers.get("accept"))
        return Response("<pets>" + "".join(_xml(p) for p in PETS.values()) + "</pets>", media_type="application/xml")

    async def inventory(request: Request) -> Response:
        accepts.append(request.headers.get("accept"))
        return JSONResponse({"available": len(PETS)})

    app = Starlette(
        routes=[
            Mount(
                "/v3",
                routes=[
                    Route("/pet/findByStatus", find_by_status),
                    Route("/pet/{pet_id:int}", get_pet),
                    Route("/store/inventory", inventory),
                ],
            )
        ]
    )
    app.state.accepts = accepts
    return app


_PET_ANSWER = {
    "application/xml": {"schema": {"$ref": "#/components/schemas/Pet"}},
    "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}},
}
_PETS_ANSWER = {
    "application/xml": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}},
    "application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}},
}

DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.4",
    "info": {"title": "Pet Store (Petstore 3 shaped)", "version": "1.0.0"},
    "servers": [{"url": "/v3"}],
    "paths": {
        "/pet/{petId}": {
            "get": {
                "operationId": "getPetById",
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer", "format": "int64"}}
                ],
                "responses": {
                    "200": {"description": "successful operation", "content": _PET_ANSWER},
                    "400": {"description": "Invalid ID supplied"},
                    "404": {"description": "Pet not found"},
                },
            }
        },
        "/pet/findByStatus": {
            "get": {
                "operationId": "findPetsByStatus",
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "schema": {"type": "string", "default": "available", "enum": ["available", "sold"]},
                    }
                ],
                "responses": {"200": {"description": "successful operation", "content": _PETS_ANSWER}},
            }
        },
        "/store/inventory": {
            "get": {
                "operationId": "getInventory",
                "responses": {
                    "200": {
                        "description": "successful operation",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "additionalProperties": {"type": "integer", "format": "int32"},
                                }
                            }
                        },
                    }
                },
            }
        },
    },
    "components": {
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name", "photoUrls"],
                "properties": {
                    "id": {"type": "integer", "format": "int64"},
                    "name": {"type": "string"},
                    "status": {"type": "string", "enum": ["available", "pending", "sold"]},
                    "photoUrls": {"type": "array", "items": {"type": "string"}},
                },
                "xml": {"name": "pet"},
            }
        }
    },
}
