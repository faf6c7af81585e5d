# SPDX-License-Identifier: GPL-2.0-or-later
"""A throw-away certificate authority made at run time with the openssl
command line tool, for the TLS tests: nothing secret is stored in the
repository, and certificates are valid only for the run.

ScratchCA(directory, name) makes a CA key and certificate (ca.pem);
  issue(name, dns=(), ips=(), expired=False, client=False) makes a key and a
  certificate signed by it and returns a Cert with .cert, .key and .pem (the
  two concatenated, as HAProxy's `crt` wants them). An expired certificate
  has validity dates entirely in the past (openssl ca -startdate/-enddate).
"""
import os
import subprocess


class Cert:
    def __init__(self, cert, key, pem):
        self.cert = cert
        self.key = key
        self.pem = pem


def _run(*args, cwd=None):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {r.stderr}")
    return r.stdout


class ScratchCA:
    def __init__(self, directory, name="clamfs test CA"):
        self.dir = os.path.join(directory, name.replace(" ", "_"))
        os.makedirs(self.dir)
        self.key = os.path.join(self.dir, "ca.key")
        self.cert = os.path.join(self.dir, "ca.pem")
        _run("req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-nodes", "-keyout", self.key,
             "-out", self.cert, "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        # `openssl ca` (for chosen validity dates) wants a database
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write("1000\n")
        self.conf = os.path.join(self.dir, "ca.cnf")
        with open(self.conf, "w") as f:
            f.write(f"""[ca]
default_ca = test
[test]
dir = {self.dir}
database = $dir/index.txt
serial = $dir/serial
new_certs_dir = $dir
certificate = {self.cert}
private_key = {self.key}
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = copy
[anything]
commonName = supplied
""")

    def issue(self, name, dns=(), ips=(), expired=False, client=False):
        base = os.path.join(self.dir, name.replace(" ", "_"))
        key, csr, cert = base + ".key", base + ".csr", base + ".crt"
        san = ",".join([f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips])
        args = ["req", "-new", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", csr, "-subj", f"/CN={name}",
                "-addext", "extendedKeyUsage=" +
                ("clientAuth" if client else "serverAuth")]
        if san:
            args += ["-addext", "subjectAltName=" + san]
        _run(*args)
        if expired:
            dates = ["-startdate", "20200101000000Z",
                     "-enddate", "20200102000000Z"]
        else:
            dates = ["-days", "2"]
        _run("ca", "-batch", "-config", self.conf, "-in", csr, "-out", cert,
             "-notext", *dates)
        pem = base + ".pem"
        with open(pem, "w") as out:
            for p in (cert, key):
                with open(p) as f:
                    out.write(f.read())
        return Cert(cert, key, pem)
