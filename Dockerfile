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
# Only what .dockerignore lets through: pyproject.toml, README.md, daemons/ and, when
# scripts/build-image made them, the wheels in build/wheels.
COPY . /src
# With wheels: offline (no index), so the build needs no network. Without: from PyPI.
RUN set -e; python3 -m venv /opt/htcpool; \
    if [ -d /src/build/wheels ]; then \
      /opt/htcpool/bin/pip install --no-cache-dir --no-index --find-links /src/build/wheels htcpool; \
    else \
      /opt/htcpool/bin/pip install --no-cache-dir /src; \
    fi; \
    find /opt/htcpool -name __pycache__ -prune -exec rm -rf {} +; \
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
