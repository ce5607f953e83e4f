# The htcpool image: the project in a venv, one daemon per container (`htcpool daemon ROLE`).
#
#   docker build -t htcpool .                  # on a machine that reaches Docker Hub and PyPI
#   ./scripts/build-image                      # anywhere: makes a base image if it cannot pull one,
#                                              # and installs from wheels built on the host
#
# Only the classic builder's syntax is used (no BuildKit-only features), so the legacy
# builder builds it. BASE must have python3 >= 3.11 with venv.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS install
RUN python3 -m venv /opt/htcpool
# The dependencies first, in a layer of their own that a rebuild reuses while they do
# not change: the wheels scripts/build-image put in build/deps (none without it; the
# glob keeps COPY from failing then, pyproject.toml always matching).
COPY pyproject.toml build/dep[s] /src/deps/
# (pip compiles the bytecode: every `htcpool` in a container, healthchecks included, starts faster.)
RUN set -e; if ls /src/deps/*.whl >/dev/null 2>&1; then \
      /opt/htcpool/bin/pip install --no-cache-dir --no-index /src/deps/*.whl; fi
# Then htcpool itself. Only what .dockerignore lets through: pyproject.toml, README.md,
# daemons/, examples/, compose/pool.conf and build/wheels (htcpool's own wheel).
COPY . /src
# With wheels: offline (no index), so the build needs no network. Without: from PyPI.
RUN set -e; \
    if [ -d /src/build/wheels ]; then \
      /opt/htcpool/bin/pip install --no-cache-dir --no-index --no-deps /src/build/wheels/htcpool-*.whl; \
    else \
      /opt/htcpool/bin/pip install --no-cache-dir /src; \
    fi; \
    /opt/htcpool/bin/python -c "import daemons.core.daemon, classad2, grpc"

FROM ${BASE}
COPY --from=install /opt/htcpool /opt/htcpool
COPY examples /examples
COPY compose/pool.conf /etc/htcpool/pool.conf
ENV PATH=/opt/htcpool/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HTCPOOL_STATE_DIR=/var/lib/htcpool \
    _CONDOR_LOCAL_DIR=/var/lib/htcpool
WORKDIR /var/lib/htcpool
# Every daemon's state lives under here; compose mounts a named volume on the schedd's
# spool (/var/lib/htcpool/spool) so its durable queue outlives the container.
# 9618: the collector (HTCondor's port). The other daemons' ports are set in pool.conf.
EXPOSE 9618
# htcpool itself is PID 1 and handles SIGTERM: it withdraws its ads and exits, so
# `docker stop` and `compose down` take well under a second per container.
ENTRYPOINT ["htcpool"]
CMD ["daemon", "collector", "--config", "/etc/htcpool/pool.conf"]
