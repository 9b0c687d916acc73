//! The connections: each one's keys and records' plaintexts, the RustCrypto seal with each
//! connection's keys expanded once (the `cpu-1` and `cpu-all` modes), and the plain reference
//! seal every mode is verified against.

use aes::cipher::{InnerIvInit, KeyIvInit, StreamCipher};
use hmac::Mac;
use vkasync::crypto::RecordKeys;

/// Deterministic pseudo-random bytes (xorshift64*).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// One connection: its keys and its records' plaintexts.
pub struct Conn {
    pub aes_key: Vec<u8>,
    pub mac_key: Vec<u8>,
    pub prefix: [u8; 4],
    pub keys: RecordKeys,
    pub records: Vec<Vec<u8>>,
}

impl Conn {
    pub fn nonce(&self, seq: usize) -> [u8; 16] {
        self.keys.nonce(seq as u64)
    }

    /// The same keys with no records (for the warm-up).
    pub fn clone_keys(&self) -> Conn {
        Conn {
            aes_key: self.aes_key.clone(),
            mac_key: self.mac_key.clone(),
            prefix: self.prefix,
            keys: self.keys.clone(),
            records: Vec::new(),
        }
    }
}

/// `n_conns` connections with their own keys, each with `n_records` records of `size` bytes.
pub fn connections(n_conns: usize, n_records: usize, size: usize) -> Vec<Conn> {
    (0..n_conns as u64)
        .map(|i| {
            let aes_key = bytes(32, 3 * i);
            let mac_key = bytes(32, 3 * i + 1);
            let prefix = (i as u32).to_be_bytes();
            let keys = RecordKeys::new(&aes_key, &mac_key, prefix).expect("a 32-byte key");
            let records = (0..n_records).map(|r| bytes(size, (i << 20) + r as u64 + 7)).collect();
            Conn { aes_key, mac_key, prefix, keys, records }
        })
        .collect()
}

/// A sealed record: ciphertext and tag.
pub type Sealed = (Vec<u8>, [u8; 32]);

/// The reference: AES-256-CTR from the nonce, then HMAC-SHA256 over nonce and ciphertext, the
/// keys expanded anew for the record (RustCrypto's plainest composition).
pub fn reference_seal(c: &Conn, seq: usize, buf: &mut [u8]) -> [u8; 32] {
    let nonce = c.nonce(seq);
    ctr::Ctr128BE::<aes::Aes256>::new(c.aes_key[..].into(), &nonce.into()).apply_keystream(buf);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&c.mac_key).expect("any key length");
    m.update(&nonce);
    m.update(buf);
    m.finalize().into_bytes().into()
}

/// Every connection's records sealed by [`reference_seal`] into copies of their plaintexts:
/// what every mode's output must equal. The connections are split into one contiguous share per
/// host core only to keep large runs short.
pub fn reference(conns: &[Conn], threads: usize) -> Vec<Vec<Sealed>> {
    let seal = |c: &Conn| -> Vec<Sealed> {
        let records = c.records.iter().enumerate();
        records
            .map(|(seq, p)| {
                let mut buf = p.clone();
                let tag = reference_seal(c, seq, &mut buf);
                (buf, tag)
            })
            .collect()
    };
    let per = conns.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let hs: Vec<_> =
            conns.chunks(per).map(|chunk| s.spawn(move || chunk.iter().map(seal).collect::<Vec<_>>())).collect();
        hs.into_iter().flat_map(|h| h.join().expect("a reference thread panicked")).collect()
    })
}

/// A connection's keys expanded once, as a server holds them after the handshake: the AES-256
/// encryption key schedule and HMAC-SHA256 keyed (its inner and outer midstates).
pub struct SealKeys {
    aes: aes::Aes256Enc,
    mac: hmac::Hmac<sha2::Sha256>,
}

impl SealKeys {
    pub fn new(c: &Conn) -> SealKeys {
        SealKeys {
            aes: aes::cipher::KeyInit::new_from_slice(&c.aes_key).expect("a 32-byte key"),
            mac: hmac::Hmac::<sha2::Sha256>::new_from_slice(&c.mac_key).expect("any key length"),
        }
    }

    /// Seals one record in place (the same result as [`reference_seal`]): the CTR keystream from
    /// a copy of the expanded schedule, the MAC from a copy of the keyed state; no allocation.
    pub fn seal(&self, nonce: [u8; 16], buf: &mut [u8]) -> [u8; 32] {
        let core =
            ctr::CtrCore::<aes::Aes256Enc, ctr::flavors::Ctr128BE>::inner_iv_init(self.aes.clone(), &nonce.into());
        ctr::Ctr128BE::from_core(core).apply_keystream(buf);
        let mut m = self.mac.clone();
        m.update(&nonce);
        m.update(buf);
        m.finalize().into_bytes().into()
    }
}
