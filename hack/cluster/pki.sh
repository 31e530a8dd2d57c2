# shellcheck shell=bash
# The local cluster's certificates and kubeconfigs, made with openssl once and
# kept in $PKI_DIR and $KUBECONFIG_DIR. Source it after lib.sh.
#
# One CA signs everything: the apiserver's serving certificate, and the
# client certificates of each component, whose subject is the user and
# groups that RBAC sees (as kubeadm does). kubelet's serving certificate is
# self-signed by kubelet itself. The service-account token key pair is
# separate.

# pki_cert NAME SUBJECT [SANS] writes NAME.key and NAME.crt, signed by the CA,
# unless NAME.crt exists. SANS is a subjectAltName value; without it the
# certificate is for clients only.
pki_cert() {
	local name=$1 subject=$2 sans=${3:-} ext
	[[ -f $PKI_DIR/$name.crt ]] && return 0
	ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment"
	if [[ -n $sans ]]; then
		ext+="
extendedKeyUsage=serverAuth
subjectAltName=$sans"
	else
		ext+="
extendedKeyUsage=clientAuth"
	fi
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI_DIR/$name.key" 2>/dev/null
	openssl req -new -key "$PKI_DIR/$name.key" -subj "$subject" -out "$PKI_DIR/$name.csr"
	openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
		-CAcreateserial -days 3650 -sha256 -extfile <(echo "$ext") -out "$PKI_DIR/$name.crt.tmp" 2>/dev/null
	mv -f "$PKI_DIR/$name.crt.tmp" "$PKI_DIR/$name.crt"
	rm -f "$PKI_DIR/$name.csr"
}

# pki_kubeconfig NAME CERT writes $KUBECONFIG_DIR/NAME.kubeconfig for the
# client certificate CERT.
pki_kubeconfig() {
	local out=$KUBECONFIG_DIR/$1.kubeconfig cert=$2 k
	[[ -f $out ]] && return 0
	k=$(tool kubectl)
	"$k" config set-cluster tend-local --kubeconfig="$out.tmp" --server="$APISERVER_URL" \
		--certificate-authority="$PKI_DIR/ca.crt" --embed-certs >/dev/null
	"$k" config set-credentials "$1" --kubeconfig="$out.tmp" \
		--client-certificate="$PKI_DIR/$cert.crt" --client-key="$PKI_DIR/$cert.key" --embed-certs >/dev/null
	"$k" config set-context tend-local --kubeconfig="$out.tmp" --cluster=tend-local --user="$1" >/dev/null
	"$k" config use-context tend-local --kubeconfig="$out.tmp" >/dev/null
	chmod 600 "$out.tmp"
	mv -f "$out.tmp" "$out"
}

# pki_ensure makes whatever certificate, key or kubeconfig is missing.
pki_ensure() {
	mkdir -p "$PKI_DIR" "$KUBECONFIG_DIR"
	chmod 700 "$PKI_DIR"
	if [[ ! -f $PKI_DIR/ca.crt ]]; then
		log "making the cluster's CA and certificates in $PKI_DIR"
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI_DIR/ca.key" 2>/dev/null
		openssl req -x509 -new -key "$PKI_DIR/ca.key" -subj "/CN=tend-local-ca" -days 3650 -sha256 \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
			-out "$PKI_DIR/ca.crt.tmp"
		mv -f "$PKI_DIR/ca.crt.tmp" "$PKI_DIR/ca.crt"
	fi
	if [[ ! -f $PKI_DIR/sa.key ]]; then
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI_DIR/sa.key.tmp" 2>/dev/null
		openssl pkey -in "$PKI_DIR/sa.key.tmp" -pubout -out "$PKI_DIR/sa.pub"
		mv -f "$PKI_DIR/sa.key.tmp" "$PKI_DIR/sa.key"
	fi
	pki_cert apiserver "/CN=kube-apiserver" \
		"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:$NODE_NAME,IP:$NODE_IP,IP:$KUBERNETES_SERVICE_IP"
	pki_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	pki_cert admin "/O=system:masters/CN=tend-admin"
	pki_cert kube-controller-manager "/CN=system:kube-controller-manager"
	pki_cert kube-scheduler "/CN=system:kube-scheduler"
	pki_cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
	pki_cert kube-proxy "/CN=system:kube-proxy"
	pki_kubeconfig kube-controller-manager kube-controller-manager
	pki_kubeconfig kube-scheduler kube-scheduler
	pki_kubeconfig kubelet kubelet
	pki_kubeconfig kube-proxy kube-proxy
	pki_kubeconfig admin admin
	if [[ ! -f $ADMIN_KUBECONFIG ]]; then
		cp "$KUBECONFIG_DIR/admin.kubeconfig" "$ADMIN_KUBECONFIG.tmp"
		mv -f "$ADMIN_KUBECONFIG.tmp" "$ADMIN_KUBECONFIG"
	fi
}
