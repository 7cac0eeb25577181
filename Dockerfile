# One image for every geoquota role: `region` (the limiter service) and
# `gossip` (the daemon) are both commands of the same CLI.
#   build stage:   the pinned pnpm (under /opt/pnpm, as scripts/lib/pnpm.sh does),
#                  the workspace with dev dependencies, `scripts/build.sh` (tsc -b
#                  to dist/, the Lua into the redis package), then `pnpm deploy
#                  --prod` of the CLI: its built files and production
#                  dependencies only (no TypeScript, no tsx, no test tools).
#   runtime stage: Node LTS slim, that directory and the region configs, run as
#                  the unprivileged `node` user, with a healthcheck.
FROM node:24-bookworm-slim AS build
WORKDIR /src
RUN npm install --prefix /opt/pnpm --no-audit --no-fund pnpm@12.4.2 \
 && ln -s /opt/pnpm/node_modules/.bin/pnpm /usr/local/bin/pnpm
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json tsconfig.build.json ./
COPY packages ./packages
COPY lua ./lua
COPY scripts ./scripts
RUN pnpm install --frozen-lockfile \
 && bash scripts/build.sh \
 && pnpm --filter @geoquota/cli deploy --prod /out

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=root:root /out ./
COPY --chown=root:root regions ./regions
USER node
# The role's own health endpoint: compose sets GEOQUOTA_HEALTH_URL per service
# (limiter /readyz, daemon /healthz); the default is the limiter's in regions/docker.
ENV GEOQUOTA_HEALTH_URL=http://127.0.0.1:7100/readyz
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
  CMD ["node", "-e", "fetch(process.env.GEOQUOTA_HEALTH_URL).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "bin/geoquota.mjs"]
