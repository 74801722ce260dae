"""CORS for the origins in ``api.cors_origins`` (Starlette's middleware), with its refusal
of a preflight in the API's error contract."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, Response

__all__ = ["CorsMiddleware"]


class CorsMiddleware(CORSMiddleware):
    """Starlette's CORS middleware, whose refused preflight (a plain-text 400) answers
    ``{"error": "cors_refused", "detail": ...}`` like every other error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        reason = bytes(response.body).decode(errors="replace")
        detail = f"CORS preflight refused: {reason} (api.cors_origins)"
        headers = {k: v for k, v in response.headers.items() if k.lower() == "vary"}
        return JSONResponse(
            {"error": "cors_refused", "detail": detail},
            status_code=response.status_code,
            headers=headers,
        )
