# One image for the API and the Dagster webserver/daemon (docker-compose.yml).
FROM node:20-slim AS web
WORKDIR /app/frontend
COPY frontend/ ./
RUN if [ -f package.json ]; then npm ci && npm run build; else mkdir -p dist; fi

FROM python:3.11-slim
WORKDIR /app
ENV PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True \
    TOKENIZERS_PARALLELISM=false RAGAUDIT_DATA_DIR=/data
# torch first, pinned: otherwise sentence-transformers pulls a much larger build
RUN pip install torch==2.13.0
COPY pyproject.toml README.md dagster.yaml ./
COPY ragaudit ragaudit
COPY api api
COPY pipelines pipelines
COPY sql sql
COPY samples samples
RUN pip install -e .
COPY --from=web /app/frontend/dist frontend/dist
EXPOSE 8000 3000
CMD ["ragaudit", "serve", "--host", "0.0.0.0", "--port", "8000"]
