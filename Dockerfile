# syntax=docker/dockerfile:1
# inferprobe container image.
#
#   docker build --build-arg INFERPROBE_BUILD_REVISION="$(git rev-parse --short=12 HEAD)" \
#     -t inferprobe:dev .
#
# The build stage uses the toolchain this repository is developed with (Rust 1.95); the
# binary links glibc dynamically (ldd: libc, libm, libgcc_s), so the runtime base is
# distroless/cc on the same Debian release (12, glibc 2.36) as the build stage. That base
# also carries the CA certificates that https:// targets are verified against, tzdata, and a
# `nonroot` user (65532). The Rust image is pinned to an exact release; distroless publishes
# only moving tags (`nonroot` follows Debian 12's security updates), so pin both by digest
# (FROM image:tag@sha256:...) where a release must be reproducible byte for byte.

FROM rust:1.95.0-slim-bookworm AS build
WORKDIR /src
# Becomes inferprobe_build_info{revision} (build.rs; .git is not in the build context).
ARG INFERPROBE_BUILD_REVISION=unknown
# Everything Cargo.toml names: a declared [[bench]] (or example, test) whose file is
# missing fails the build (scripts/validate-deploy.sh checks this context).
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY benches ./benches
# The cache mounts keep the registry and incremental build across image builds; the binary
# is copied out of the cached target directory in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    INFERPROBE_BUILD_REVISION="${INFERPROBE_BUILD_REVISION}" \
    cargo build --release --locked \
    && install -D -m 0755 target/release/inferprobe /out/inferprobe

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="inferprobe" \
      org.opencontainers.image.description="Continuous open-loop probe for LLM inference endpoints: TTFT, TPOT, ITL and E2EL as Prometheus metrics" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/inferprobe /usr/local/bin/inferprobe
# The numeric id (distroless's nonroot), so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# One malloc arena: glibc otherwise gives each busy thread its own and keeps what is freed
# there. Over a million probes RSS wandered by up to 4.6 MiB with the default arenas and up
# to 2.3 MiB with one, growing in neither (bench/RESULTS.md); a flatter, lower RSS makes a
# leak alert on this pod less noisy. The daemon's few threads do not contend at probe rates.
ENV GLIBC_TUNABLES=glibc.malloc.arena_max=1
EXPOSE 9464
# The configuration's directory: Kubernetes mounts a ConfigMap there (a directory mount, which
# the kubelet updates in place, so a reload reads an edited ConfigMap; a subPath never changes).
ENTRYPOINT ["/usr/local/bin/inferprobe", "run", "--config", "/etc/inferprobe/config/config.toml"]
