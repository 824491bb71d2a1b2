# chatfn as a container image: the HTTP channel and its web page on port 8080, everything it
# keeps under /data (the SQLite database, plugins, knowledge bases, an optional config.yaml).
#
#   docker build -t chatfn .
#   docker run -p 8080:8080 -v chatfn:/data -e OPENAI_API_KEY=sk-... chatfn
#
# Build arguments:
#   BASE_IMAGE  a Debian-based image with python3 (>= 3.11) that has the venv module
#               (default: the official slim Python image; CI passes one made with debootstrap)
#   EXTRAS      the extras installed with the wheel (default: what compose.yaml's scale-out
#               stack needs: PostgreSQL and RabbitMQ; e.g. "all", or "" for the base install)
#   SYSTEM_PACKAGES  Debian packages added to the image (default none). For voice messages:
#               "ffmpeg espeak-ng libopencore-amrnb0" (conversion, the offline voice, the AMR
#               encoder WeCom and DingTalk voice needs; ffmpeg adds about 250 MB), with EXTRAS
#               naming `voice` (the SILK codec for QQ and WeChat)
ARG BASE_IMAGE=python:3.12-slim-bookworm

# --- builder: the wheel of this tree, installed with its extras into /opt/chatfn (a venv) ---
FROM ${BASE_IMAGE} AS builder
ARG EXTRAS=postgres,rabbitmq
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY . /src
RUN python3 -m venv /opt/chatfn \
 && /opt/chatfn/bin/pip wheel --no-deps --quiet --wheel-dir /wheels /src \
 && wheel="$(ls /wheels/chatfn-*.whl)" \
 && if [ -n "$EXTRAS" ]; then spec="${wheel}[${EXTRAS}]"; else spec="$wheel"; fi \
 && /opt/chatfn/bin/pip install --quiet "$spec" \
 && /opt/chatfn/bin/pip uninstall --quiet --yes setuptools pip \
 && find /opt/chatfn -depth -name __pycache__ -type d -exec rm -rf {} + \
 && /opt/chatfn/bin/python -m compileall -q -j 0 /opt/chatfn/lib > /dev/null \
 && /opt/chatfn/bin/chatfn --version

# --- the image: the base plus the venv, no compilers, no pip, a non-root user ---
FROM ${BASE_IMAGE}
# The version is chatfn/common/version.py's (the one place it lives), passed in by the build:
#   --build-arg VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' chatfn/common/version.py)"
ARG VERSION=unknown
ARG SOURCE=""
ARG REVISION=""
LABEL org.opencontainers.image.title="chatfn" \
      org.opencontainers.image.description="A chat bot framework in which every capability is a plain Python function." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="MIT"
ARG SYSTEM_PACKAGES=""
RUN if [ -n "$SYSTEM_PACKAGES" ]; then \
      apt-get update -q \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
           $SYSTEM_PACKAGES \
      && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    fi
RUN groupadd --system --gid 10001 chatfn \
 && useradd --uid 10001 --gid chatfn --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin chatfn \
 && mkdir -p /data/plugins \
 && chown -R chatfn:chatfn /data
COPY --from=builder /opt/chatfn /opt/chatfn
# /data is the working folder: /data/config.yaml when it exists (else the embedded defaults and
# OPENAI_API_KEY / OPENAI_BASE_URL / CHATFN_MODEL from the environment), the SQLite file under
# /data/data/, plugins in /data/plugins.
ENV PATH=/opt/chatfn/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CHATFN_HEALTH_URL=http://127.0.0.1:8080/healthz
WORKDIR /data
VOLUME ["/data"]
USER chatfn
EXPOSE 8080
STOPSIGNAL SIGTERM
# Cheap and offline: `chatfn check` (config, database, plugins; no model request), then the
# running process's /healthz when it serves HTTP (set CHATFN_HEALTH_URL= for a worker).
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
  CMD chatfn check > /dev/null && { [ -z "$CHATFN_HEALTH_URL" ] || python3 -c "import os, urllib.request; urllib.request.urlopen(os.environ['CHATFN_HEALTH_URL'], timeout=5)"; }
# chatfn is PID 1 and stops on SIGTERM: unfinished turns get bot.shutdown_grace (5 s), what
# they do not finish is resumed at the next start; replies wait in the outbox.
ENTRYPOINT ["chatfn"]
CMD ["run", "--channel", "http", "--host", "0.0.0.0", "--port", "8080"]
