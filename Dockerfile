# Image for the worker, the API and the simulator (docker-compose.yml picks the command).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
# The worker loads a prebuilt workflow bundle in production instead of bundling at start-up (the build also copies the
# wallets' SQL migrations, which tsc does not, into dist/db/migrations).
RUN npm run build && npm run build:workflow-bundle

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY --from=build /app/dist ./dist
# The simulator keeps its state under /data (a named volume takes this directory's owner on first use).
RUN mkdir -p /data && chown node:node /data
USER node
