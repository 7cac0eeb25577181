# One image for every geoquota role: `region` (the limiter service) and
# `gossip` (the daemon) are both commands of the same CLI. Sources run through
# tsx, as in development, so there is no separate build step to drift.
FROM node:20-bookworm-slim
WORKDIR /app
RUN npm install -g pnpm@12.4.2
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.json ./
COPY packages ./packages
COPY lua ./lua
COPY regions ./regions
RUN pnpm install --frozen-lockfile --prod=false
ENV NODE_ENV=production
ENTRYPOINT ["node", "packages/cli/bin/geoquota.mjs"]
