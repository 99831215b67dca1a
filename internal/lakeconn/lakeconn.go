// Package lakeconn maps the configuration's lake section onto the lake
// package's options, so every process (the reckon commands, the SQL
// endpoint's mirror) reaches object storage the same way.
package lakeconn

import (
	"reckon/internal/config"
	"reckon/lake/storage"
)

// S3Options are the object storage settings of s, with the secret key
// file and the CA bundle read.
func S3Options(s config.LakeS3) (storage.S3Options, error) {
	secret, err := s.ResolveSecretAccessKey()
	if err != nil {
		return storage.S3Options{}, err
	}
	tlsConf, err := s.ClientTLS()
	if err != nil {
		return storage.S3Options{}, err
	}
	return storage.S3Options{
		Endpoint: s.Endpoint, Region: s.Region, AccessKeyID: s.AccessKeyID,
		SecretAccessKey: secret.Reveal(), SessionToken: s.SessionToken.Reveal(), TLS: tlsConf,
	}, nil
}
