#!/usr/bin/env bash
# Nightly refresh: a Cloud Scheduler job that launches the Flex Template at 03:00.
# Usage: PROJECT=.. REGION=.. DATA_BUCKET=.. TEMPLATE_PATH=gs://../x.json IMAGE=.. deploy/schedule.sh
set -euo pipefail
cd "$(dirname "$0")"
: "${PROJECT:?}" "${REGION:?}" "${DATA_BUCKET:?}" "${TEMPLATE_PATH:?}" "${IMAGE:?}"
LAUNCHER_SA="tfrp-launcher@${PROJECT}.iam.gserviceaccount.com"
WORKER_SA="${WORKER_SA:-tfrp-worker@${PROJECT}.iam.gserviceaccount.com}"
export TEMPLATE_PATH DATA_BUCKET WORKER_SA IMAGE

gcloud iam service-accounts create tfrp-launcher --project "$PROJECT" || true
gcloud iam service-accounts create tfrp-worker --project "$PROJECT" || true
# The scheduler's identity launches jobs and acts as the worker service account.
for role in roles/dataflow.developer roles/iam.serviceAccountUser; do
    gcloud projects add-iam-policy-binding "$PROJECT" \
        --member "serviceAccount:${LAUNCHER_SA}" --role "$role" --condition None
done
# Workers run the job, read manifests and images, write shards, pull the image.
for role in roles/dataflow.worker roles/storage.objectAdmin roles/artifactregistry.reader; do
    gcloud projects add-iam-policy-binding "$PROJECT" \
        --member "serviceAccount:${WORKER_SA}" --role "$role" --condition None
done

envsubst < nightly_launch.json > /tmp/tfrp-nightly-launch.json
gcloud scheduler jobs create http tfrecord-nightly \
    --project "$PROJECT" --location "$REGION" \
    --schedule "0 3 * * *" --time-zone "Etc/UTC" \
    --http-method POST \
    --uri "https://dataflow.googleapis.com/v1b3/projects/${PROJECT}/locations/${REGION}/flexTemplates:launch" \
    --oauth-service-account-email "$LAUNCHER_SA" \
    --headers "Content-Type=application/json" \
    --message-body-from-file /tmp/tfrp-nightly-launch.json
