# mpijob-controller: one image for every component; the Deployment's args choose which
# (`watch`, `consume --only history|rules`, `api`; see deploy/).
#   docker build -t mpijob-controller:0.1.0 .
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONPATH=/app
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY controller ./controller
COPY watchers ./watchers
COPY consumers ./consumers
COPY migrations ./migrations
# Installs the dependencies and the `mpijob-controller` command; the code itself runs from
# /app (PYTHONPATH), where controller/store/migrate.py finds alembic.ini and migrations/ beside it.
RUN python -m pip install --upgrade "pip>=25.1" && python -m pip install . && rm -rf build
# A numeric non-root user, so runAsNonRoot can verify it; OpenShift assigns one of its range.
USER 10001:0
EXPOSE 8480 9464
ENTRYPOINT ["mpijob-controller"]
CMD ["--help"]
