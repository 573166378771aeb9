module github.com/orkestra-rs/orkestra-rs/examples/go-echo

go 1.26

require github.com/orkestra-rs/orkestra-rs/guest-sdk/go v0.1.0

replace github.com/orkestra-rs/orkestra-rs/guest-sdk/go => ../../guest-sdk/go
