# mpijob-controller: one image for every component; the Deployment's args choose which
# (`watch`, `consume --only <role>`, `api`, `admission`; see deploy/ and docs/deploy.md).
#   docker build -t <registry>/mpijob-controller:<version> .
# The dependencies come from requirements.lock (pinned, hash-checked: `make lock` writes it),
# then the project's own wheel, which carries its migrations: nothing runs from the sources,
# and nothing of the embedded services or the tests is installed.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock ./
RUN python -m pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml setup.py README.md LICENSE ./
COPY controller ./controller
COPY watchers ./watchers
COPY consumers ./consumers
COPY migrations ./migrations
COPY examples/scenarios ./examples/scenarios
RUN python -m pip install --no-deps . && cd / && rm -rf /src
WORKDIR /
# A numeric non-root user with group 0 and no passwd entry, as OpenShift runs it; runAsNonRoot can verify it.
USER 10001:0
EXPOSE 8480 8443 9464
ENTRYPOINT ["mpijob-controller"]
CMD ["--help"]
