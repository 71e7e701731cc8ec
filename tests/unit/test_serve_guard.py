"""rlve.serve's guard: 401 without the secret on every path rlve uses, 404 on vLLM's other
(dev) endpoints, /health open; the trainer's client sends the secret of its environment."""

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from rlve.inference.serve_guard import SECRET_ENV, ServeGuard, bearer_headers


def server() -> TestClient:
    async def reached(request):
        return PlainTextResponse("reached")

    paths = ["/health", "/v1/completions", "/collective_rpc", "/reset_prefix_cache", "/sleep"]
    app = Starlette(routes=[Route(p, reached, methods=["GET", "POST"]) for p in paths])
    return TestClient(ServeGuard(app, secret="s3cret"))


def test_control_and_generation_paths_need_the_secret():
    client = server()
    for path in ("/collective_rpc", "/reset_prefix_cache", "/v1/completions"):
        assert client.post(path, json={"method": "rlve_load_weights_file"}).status_code == 401
        wrong = client.post(path, headers={"Authorization": "Bearer s3cre"})
        assert wrong.status_code == 401 and SECRET_ENV in wrong.json()["error"]
        right = client.post(path, headers={"Authorization": "Bearer s3cret"})
        assert (right.status_code, right.text) == (200, "reached")


def test_other_dev_endpoints_are_closed_even_with_the_secret_and_health_is_open():
    client = server()
    assert client.post("/sleep", headers={"Authorization": "Bearer s3cret"}).status_code == 404
    assert client.get("/health").text == "reached"


def test_the_guard_refuses_to_start_without_a_secret(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(RuntimeError, match=SECRET_ENV):
        ServeGuard(app=None)
    assert bearer_headers() == {}
    monkeypatch.setenv(SECRET_ENV, "abc")
    assert bearer_headers() == {"Authorization": "Bearer abc"}
