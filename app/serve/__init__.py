"""``garag serve``: the verification service and its web page (the ``serve`` extra: FastAPI, uvicorn).

Import :func:`app.serve.app.create_app` and :class:`app.serve.service.Service`
only where the extra is installed; this package's ``__init__`` imports nothing heavy.
"""
