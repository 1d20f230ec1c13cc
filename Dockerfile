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

# Multi-arch without emulation: the build stage runs on the builder's own platform and
# cross-compiles for the target's (gcc's cross linker and Rust's std for it), so
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/inferprobe:<tag> --push .
# builds both at native speed; a plain `docker build` builds the builder's own platform.
FROM --platform=$BUILDPLATFORM rust:1.95.0-slim-bookworm AS build
ARG TARGETARCH
WORKDIR /src
# The cross linker and C toolchain (crates with C code) for the target, when it differs.
# hadolint ignore=DL3008
RUN set -eux; \
    case "${TARGETARCH}" in \
      amd64) triple=x86_64-unknown-linux-gnu; gnu=x86-64-linux-gnu ;; \
      arm64) triple=aarch64-unknown-linux-gnu; gnu=aarch64-linux-gnu ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}: amd64 or arm64" >&2; exit 1 ;; \
    esac; \
    echo "${triple}" >/rust-target; \
    if [ "$(uname -m)" != "${triple%%-*}" ]; then \
      apt-get update; \
      apt-get install -y --no-install-recommends "gcc-${gnu}" "libc6-dev-${TARGETARCH}-cross"; \
      rm -rf /var/lib/apt/lists/*; \
      rustup target add "${triple}"; \
    fi
ENV CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=x86_64-linux-gnu-gcc \
    CC_x86_64_unknown_linux_gnu=x86_64-linux-gnu-gcc
# Becomes inferprobe_build_info{revision} (build.rs; .git is not in the build context).
ARG INFERPROBE_BUILD_REVISION=unknown
# Everything Cargo.toml names: a declared [[bench]] (or example, test) whose file is
# missing fails the build (scripts/validate-deploy.sh checks this context).
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY benches ./benches
# The cache mounts keep the registry and build across image builds (one target directory per
# architecture); the binary is copied out of the cached target directory in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=inferprobe-target-${TARGETARCH} \
    triple="$(cat /rust-target)"; \
    INFERPROBE_BUILD_REVISION="${INFERPROBE_BUILD_REVISION}" \
    cargo build --release --locked --target "${triple}" \
    && install -D -m 0755 "target/${triple}/release/inferprobe" /out/inferprobe

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
