#!/usr/bin/env bash
# Build the image (launcher + workers in one), push it, and register the Flex Template.
# Usage: PROJECT=my-proj REGION=us-central1 REPO=tfrp BUCKET=my-bucket deploy/build_template.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PROJECT:?}" "${REGION:?}" "${REPO:?}" "${BUCKET:?}"
# Read from the checkout, which need not be installed where this runs.
VERSION="$(python3 -c 'import runpy; print(runpy.run_path("pipeline/version.py")["__version__"])')"
IMAGE="${REGION}-docker.pkg.dev/${PROJECT}/${REPO}/tfrecord-pipeline:${VERSION}"

gcloud builds submit --project "$PROJECT" --region "$REGION" \
    --tag "$IMAGE" --config /dev/stdin . <<YAML
steps:
- name: gcr.io/cloud-builders/docker
  args: [build, -f, deploy/Dockerfile, -t, "$IMAGE", .]
images: ["$IMAGE"]
YAML

gcloud dataflow flex-template build "gs://${BUCKET}/templates/tfrecord-pipeline-${VERSION}.json" \
    --project "$PROJECT" \
    --image "$IMAGE" \
    --sdk-language PYTHON \
    --metadata-file deploy/metadata.json

echo "template: gs://${BUCKET}/templates/tfrecord-pipeline-${VERSION}.json"
echo "image:    ${IMAGE}"
