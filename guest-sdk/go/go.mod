module github.com/orkestra-rs/orkestra-rs/guest-sdk/go

go 1.26
