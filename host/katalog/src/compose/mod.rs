//! A Katalog assembled from its files, before it is typed: `include`s merged under inline
//! values ([`include`]), motifs and their inputs ([`motif`]), `kind: Komposer` files and
//! their overrides ([`komposer`]), CRDs given as files of their own ([`crd_file`]), and
//! upstream's flat and older shapes translated ([`legacy`]).

pub(crate) mod condition_source;
pub(crate) mod crd_file;
pub(crate) mod include;
pub(crate) mod komposer;
pub(crate) mod legacy;
pub(crate) mod motif;
