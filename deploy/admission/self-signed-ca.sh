#!/usr/bin/env bash
# Without cert-manager: make the admission webhook's certificates with openssl.
#
#   deploy/admission/self-signed-ca.sh [namespace] [days]      (defaults: mpijob-controller 825)
#
# 1. a CA and a serving certificate for the webhook: Secret mpijc-admission-tls, and the CA in the
#    webhook configuration's caBundle;
# 2. a client CA and, from it, the client certificate the kube-apiserver presents to the webhook:
#    the CA's certificate (not its key) goes into Secret mpijc-admission-client-ca, which the
#    webhook trusts (MPIJC_ADMISSION__CLIENT_CA_FILE); the certificate and its key are written to
#    $OUT_DIR (default ./mpijc-admission-apiserver) as apiserver-client.crt/.key, with the files of
#    deploy/admission/apiserver/: copy them to /etc/kubernetes/mpijc-admission/ on every control
#    plane node (docs/admission.md). The key is never stored in the cluster.
#
# Run it after applying the manifests, and again before `days` run out (the webhook reloads the
# new serving certificate from the Secret by itself; the kube-apiserver reloads its client
# certificate files). Keep the CAs' keys to renew without changing what is trusted: with CA_DIR
# set to a directory, ca.crt/ca.key (serving) and client-ca.crt/client-ca.key (client) are
# created there once and reused. Without CA_DIR every run makes new CAs, and the old client
# certificate is refused as soon as the webhook restarts.
set -euo pipefail

namespace=${1:-mpijob-controller}
days=${2:-825}
service=mpijc-admission
webhook=mpijob-controller-audit
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT_DIR:-./mpijc-admission-apiserver}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ca_dir=${CA_DIR:-$work}
umask 077

new_ca() {  # new_ca <name> <common name>: a P-256 CA valid for 10 years, unless it exists
  if [[ ! -f "$ca_dir/$1.key" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -subj "/CN=$2" -keyout "$ca_dir/$1.key" -out "$ca_dir/$1.crt" 2>/dev/null
  fi
}

issue() {  # issue <ca> <name> <subject> <extensions file>: a P-256 certificate from <ca>
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "$3" -keyout "$work/$2.key" -out "$work/$2.csr" 2>/dev/null
  openssl x509 -req -in "$work/$2.csr" -CA "$ca_dir/$1.crt" -CAkey "$ca_dir/$1.key" \
    -CAcreateserial -days "$days" -extfile "$4" -out "$work/$2.crt" 2>/dev/null
  openssl verify -CAfile "$ca_dir/$1.crt" "$work/$2.crt" >/dev/null
}

new_ca ca mpijc-admission-ca
{
  printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\n' \
    "$service" "$service" "$namespace" "$service" "$namespace" "$service" "$namespace"
  printf 'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n'
} >"$work/server.ext"
issue ca tls "/CN=$service.$namespace.svc" "$work/server.ext"

new_ca client-ca mpijc-admission-client-ca
printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n' >"$work/client.ext"
issue client-ca apiserver-client "/CN=kube-apiserver-mpijc-admission-client" "$work/client.ext"

kubectl -n "$namespace" create secret tls mpijc-admission-tls \
  --cert "$work/tls.crt" --key "$work/tls.key" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$namespace" create secret generic mpijc-admission-client-ca \
  --from-file=ca.crt="$ca_dir/client-ca.crt" --dry-run=client -o yaml | kubectl apply -f -
bundle=$(base64 <"$ca_dir/ca.crt" | tr -d '\n')
kubectl patch validatingwebhookconfiguration "$webhook" --type=json \
  -p "[{\"op\": \"add\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$bundle\"}]"

mkdir -p "$out"
cp "$work/apiserver-client.crt" "$out/apiserver-client.crt"
cp "$work/apiserver-client.key" "$out/apiserver-client.key"
cp "$here/apiserver/admission-configuration.yaml" "$out/"
sed "s/mpijc-admission\.mpijob-controller\.svc/$service.$namespace.svc/" \
  "$here/apiserver/webhook-kubeconfig.yaml" >"$out/webhook-kubeconfig.yaml"
echo "webhook certificate valid for $days days; CA in $webhook's caBundle"
echo "kube-apiserver client certificate valid for $days days in $out: copy that directory to"
echo "/etc/kubernetes/mpijc-admission/ on every control plane node (docs/admission.md)"
