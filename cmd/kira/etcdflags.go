package main

import (
	"flag"
	"os"

	"github.com/kira-scheduler/kira/etcdclient"
)

// etcdClientFlags are etcdctl's client flags, which every command that
// talks to etcd takes; each defaults from its KIRA_ETCD_* variable, so a
// secret never has to be on a command line.
type etcdClientFlags struct {
	endpoints string
	cfg       etcdclient.Config
}

// register adds the flags to fs; defaultEndpoints is used when neither
// --etcd nor KIRA_ETCD_ENDPOINTS is given.
func (e *etcdClientFlags) register(fs *flag.FlagSet, defaultEndpoints, endpointsUsage string) {
	env := etcdclient.FromEnv()
	e.endpoints = defaultEndpoints
	if v := os.Getenv(etcdclient.EnvEndpoints); v != "" {
		e.endpoints = v
	}
	fs.StringVar(&e.endpoints, "etcd", e.endpoints, endpointsUsage+" (also $"+etcdclient.EnvEndpoints+")")
	fs.StringVar(&e.cfg.CACert, "cacert", env.CACert, "verify etcd's server certificates with this CA bundle (also $"+etcdclient.EnvCACert+")")
	fs.StringVar(&e.cfg.Cert, "cert", env.Cert, "client certificate for etcd's --client-cert-auth (also $"+etcdclient.EnvCert+")")
	fs.StringVar(&e.cfg.Key, "key", env.Key, "key of --cert (also $"+etcdclient.EnvKey+")")
	fs.StringVar(&e.cfg.User, "user", env.User, "etcd user: name, or name:password (also $"+etcdclient.EnvUser+")")
	fs.StringVar(&e.cfg.Password, "password", env.Password, "password of --user; prefer --password-file or $"+etcdclient.EnvPassword+": a command line is visible to every user of the machine")
	fs.StringVar(&e.cfg.PasswordFile, "password-file", "", "file whose first line is the password of --user")
}

// config is the client configuration the flags give.
func (e *etcdClientFlags) config() etcdclient.Config {
	c := e.cfg
	c.Endpoints = etcdclient.SplitList(e.endpoints)
	return c
}
