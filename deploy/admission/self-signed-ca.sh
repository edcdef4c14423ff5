#!/usr/bin/env bash
# Without cert-manager: make a CA and a serving certificate for the admission webhook, store them
# in Secret mpijc-admission-tls, and put the CA into the webhook configuration's caBundle.
#
#   deploy/admission/self-signed-ca.sh [namespace] [days]      (defaults: mpijob-controller 825)
#
# Run it after applying the manifests, and again before `days` run out (the webhook reloads the
# new certificate from the Secret by itself). Keep ca.key if you want to renew without changing
# the caBundle: set CA_DIR to a directory holding ca.crt/ca.key and they are reused.
set -euo pipefail

namespace=${1:-mpijob-controller}
days=${2:-825}
service=mpijc-admission
webhook=mpijob-controller-audit
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ca_dir=${CA_DIR:-$work}

if [[ ! -f "$ca_dir/ca.key" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=mpijc-admission-ca" -keyout "$ca_dir/ca.key" -out "$ca_dir/ca.crt" 2>/dev/null
fi
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/CN=$service.$namespace.svc" -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
{
  printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\n' \
    "$service" "$service" "$namespace" "$service" "$namespace" "$service" "$namespace"
  printf 'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n'
} >"$work/ext"
openssl x509 -req -in "$work/tls.csr" -CA "$ca_dir/ca.crt" -CAkey "$ca_dir/ca.key" -CAcreateserial \
  -days "$days" -extfile "$work/ext" -out "$work/tls.crt" 2>/dev/null
openssl verify -CAfile "$ca_dir/ca.crt" "$work/tls.crt" >/dev/null

kubectl -n "$namespace" create secret tls mpijc-admission-tls \
  --cert "$work/tls.crt" --key "$work/tls.key" --dry-run=client -o yaml | kubectl apply -f -
bundle=$(base64 <"$ca_dir/ca.crt" | tr -d '\n')
kubectl patch validatingwebhookconfiguration "$webhook" --type=json \
  -p "[{\"op\": \"add\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$bundle\"}]"
echo "webhook certificate valid for $days days; CA in $webhook's caBundle"
