//! The crypto kernels on the real device, with validation: known-answer tests from the standards,
//! property tests against the RustCrypto crates, dispatch splitting, device-buffer chaining, and
//! typed errors.
//!
//! The property tests run `PROPTEST_CASES` cases when that is set, else a small default that
//! keeps this file well under a minute on lavapipe in debug mode.

mod common;
use common::*;
use hmac::Mac;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use sha2::Digest;
use std::ops::Range;
use vkasync::crypto::{
    ctr_add, digest_bytes, pack_le_words, unpack_le_words, AesKey, Crypto, HmacKey, MessageBatch, MessageIndex,
};
use vkasync::{kernels, BindingKind, Buffer, CommandList, Device, Error, Kernel, MemoryKind, Recorder};

// ---------------------------------------------------------------------- CPU references

/// AES-CTR with a 128-bit big-endian counter (RustCrypto `Ctr128BE`).
fn cpu_sha256(m: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(m).into()
}

fn cpu_hmac(key: &[u8], m: &[u8]) -> [u8; 32] {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(m);
    mac.finalize().into_bytes().into()
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn iv(s: &str) -> [u8; 16] {
    unhex(s).try_into().unwrap()
}

fn setup() -> (Device, Crypto) {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    (device, crypto)
}

// ---------------------------------------------------------------------- proptest plumbing

/// `default_cases` cases unless `PROPTEST_CASES` is set (`ProptestConfig::with_cases` would
/// override the variable, so it is only used when the variable is absent).
fn config(default_cases: u32) -> ProptestConfig {
    let base = if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(default_cases)
    };
    // Each case is a GPU round trip: keep shrinking of a failure bounded.
    ProptestConfig { source_file: Some(file!()), max_shrink_iters: 256, ..base }
}

fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(config(cases));
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// Lengths where AES (block = 16) and SHA-256 (block = 64, padding boundary at 55/56) change
/// behaviour.
const EDGE_LENGTHS: [usize; 12] = [0, 1, 15, 16, 17, 55, 56, 63, 64, 65, 119, 120];

fn bytes_of_len(len: impl Strategy<Value = usize>) -> impl Strategy<Value = Vec<u8>> {
    len.prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n))
}

fn aes_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(16usize), Just(24), Just(32)].prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n))
}

/// Random IVs, and IVs a few blocks below a carry out of the low word, out of the low 64 bits,
/// or below the 2^128 wrap.
fn ctr_iv() -> impl Strategy<Value = [u8; 16]> {
    prop_oneof![
        any::<[u8; 16]>(),
        (any::<[u8; 12]>(), 0u32..300).prop_map(|(hi, d)| {
            let mut iv = [0u8; 16];
            iv[..12].copy_from_slice(&hi);
            iv[12..].copy_from_slice(&(u32::MAX - d).to_be_bytes());
            iv
        }),
        (any::<u64>(), 0u64..300).prop_map(|(hi, d)| (((hi as u128) << 64) | (u64::MAX - d) as u128).to_be_bytes()),
        (0u128..300).prop_map(|d| (u128::MAX - d).to_be_bytes()),
    ]
}

fn message() -> impl Strategy<Value = Vec<u8>> {
    bytes_of_len(prop_oneof![
        3 => proptest::sample::select(EDGE_LENGTHS.to_vec()),
        3 => 0usize..300,
        1 => 0usize..=65536,
    ])
}

// ---------------------------------------------------------------------- the kernels as documented

#[test]
fn hashing_one_message_over_several_dispatches_gives_identical_results() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    // Lengths around the padding boundary (55/56) and the block boundary, up to ten blocks, so
    // that messages end inside, at the start and at the end of a window, and one window
    // finishes a short message while a long one goes on. tests/long_messages.rs does the same
    // at the real window size.
    let mut msgs: Vec<Vec<u8>> = (0..=9usize)
        .flat_map(|blocks| EDGE_LENGTHS.map(|n| blocks * 64 + n))
        .map(|len| (0..len).map(|i| (i * 31 + len + i / 97) as u8).collect())
        .collect();
    msgs.push(vec![0x5a; 1000]);
    let whole = crypto.sha256_many_blocking(&msgs).unwrap();
    assert_eq!(whole, msgs.iter().map(|m| cpu_sha256(m)).collect::<Vec<_>>());
    let macs = crypto.hmac_sha256_many_blocking(b"k", &msgs).unwrap();
    assert_eq!(macs, msgs.iter().map(|m| cpu_hmac(b"k", m)).collect::<Vec<_>>());
    // 0 is taken as 1 block per dispatch; the 1,000-byte message needs 16 blocks.
    for blocks in [0, 1, 2, 3, 7] {
        let windows = crypto.clone().with_sha256_blocks_per_dispatch(blocks);
        assert_eq!(windows.sha256_many_blocking(&msgs).unwrap(), whole, "SHA-256, {blocks} blocks per dispatch");
        assert_eq!(windows.hmac_sha256_many_blocking(b"k", &msgs).unwrap(), macs, "HMAC, {blocks} blocks per dispatch");
    }
    drop(crypto);
    finish(device);
}

#[test]
fn kernels_have_the_documented_interfaces() {
    let device = device();
    let aes = Kernel::new(&device, &kernels::AES_CTR).unwrap();
    let aes16 = Kernel::new(&device, &kernels::AES_CTR_C16).unwrap();
    let multi = Kernel::new(&device, &kernels::AES_CTR_MULTI).unwrap();
    let multi16 = Kernel::new(&device, &kernels::AES_CTR_MULTI_C16).unwrap();
    let sha_multi = Kernel::new(&device, &kernels::SHA256_MULTI).unwrap();
    let sha = Kernel::new(&device, &kernels::SHA256_BATCH).unwrap();
    let hmac = Kernel::new(&device, &kernels::HMAC_SHA256_BATCH).unwrap();
    assert_eq!((aes.push_constant_size(), aes16.push_constant_size()), (32, 32));
    assert_eq!(
        (multi.push_constant_size(), multi16.push_constant_size(), sha_multi.push_constant_size()),
        (12, 12, 16)
    );
    assert_eq!((sha.push_constant_size(), hmac.push_constant_size()), (16, 80));
    for k in [&aes, &aes16, &multi, &multi16, &sha, &hmac] {
        assert_eq!(k.local_size(), [256, 1, 1], "{}", k.name());
    }
    // One warp per workgroup: a flush's few thousand messages spread over every SM.
    assert_eq!(sha_multi.local_size(), [32, 1, 1]);
    let read_only = |k: &Kernel| k.reflection().bindings.iter().map(|b| b.read_only).collect::<Vec<_>>();
    let kinds = |k: &Kernel| k.reflection().bindings.iter().map(|b| b.kind).collect::<Vec<_>>();
    // Round keys (and T-table) read-only, data read-write; messages and index read-only, digests
    // written.
    for k in [&aes, &aes16] {
        assert_eq!(read_only(k), [true, false], "{}", k.name());
    }
    assert_eq!(kinds(&aes), [BindingKind::Uniform, BindingKind::Storage]);
    assert_eq!(kinds(&aes16), [BindingKind::Uniform, BindingKind::Storage]);
    // Multi-record kernels: table, keys and records read-only, data in place.
    for k in [&multi, &multi16] {
        assert_eq!(read_only(k), [true, true, true, false], "{}", k.name());
        assert_eq!(kinds(k)[0], BindingKind::Uniform, "{}", k.name());
    }
    assert_eq!(read_only(&sha_multi), [true, true, true, false]);
    assert_eq!(read_only(&sha), [true, true, false]);
    assert_eq!(read_only(&hmac), [true, true, false]);
    drop((aes, aes16, multi, multi16, sha_multi, sha, hmac));
    finish(device);
}

// ---------------------------------------------------------------------- known answers

#[test]
fn fips197_appendix_c_single_blocks() {
    let (device, crypto) = setup();
    // AES(counter) XOR zeros = AES(counter): with the FIPS plaintext as the counter block, the
    // output is the FIPS ciphertext.
    let plaintext = iv("00112233445566778899aabbccddeeff");
    for (key, expected) in [
        ("000102030405060708090a0b0c0d0e0f", "69c4e0d86a7b0430d8cdb78070b4c55a"),
        ("000102030405060708090a0b0c0d0e0f1011121314151617", "dda97ca4864cdfe06eaf70a0ec0d7191"),
        ("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "8ea2b7ca516745bfeafc49904b496089"),
    ] {
        let key = unhex(key);
        let out = crypto.aes_ctr_blocking(&key, &plaintext, &[0; 16]).unwrap();
        assert_eq!(out, unhex(expected), "AES-{}", key.len() * 8);
        assert_eq!(cpu_ctr(&key, &plaintext, &[0; 16]), unhex(expected), "RustCrypto agrees");
    }
    drop(crypto);
    finish(device);
}

#[test]
fn sp800_38a_f5_ctr_vectors() {
    let (device, crypto) = setup();
    let counter = iv("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    let plaintext = unhex(
        "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
         30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710",
    );
    for (section, key, ciphertext) in [
        (
            "F.5.1 CTR-AES128",
            "2b7e151628aed2a6abf7158809cf4f3c",
            "874d6191b620e3261bef6864990db6ce 9806f66b7970fdff8617187bb9fffdff
             5ae4df3edbd5d35e5b4f09020db03eab 1e031dda2fbe03d1792170a0f3009cee",
        ),
        (
            "F.5.3 CTR-AES192",
            "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
            "1abc932417521ca24f2b0459fe7e6e0b 090339ec0aa6faefd5ccc2c6f4ce8e94
             1e36b26bd1ebc670d1bd1d665620abf7 4f78a7f6d29809585a97daec58c6b050",
        ),
        (
            "F.5.5 CTR-AES256",
            "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
            "601ec313775789a5b7a7f504bbf3d228 f443e3ca4d62b59aca84e990cacaf5c5
             2b0930daa23de94ce87017ba2d84988d dfc9c58db67aada613c2dd08457941a6",
        ),
    ] {
        let key = unhex(key);
        let ciphertext = unhex(ciphertext);
        assert_eq!(crypto.aes_ctr_blocking(&key, &counter, &plaintext).unwrap(), ciphertext, "{section}");
        assert_eq!(cpu_ctr(&key, &counter, &plaintext), ciphertext, "{section}: RustCrypto agrees");
        // Decryption (F.5.2/4/6) is the same operation.
        assert_eq!(crypto.aes_ctr_blocking(&key, &counter, &ciphertext).unwrap(), plaintext, "{section} decrypt");
    }
    drop(crypto);
    finish(device);
}

#[test]
fn fips180_sha256_vectors() {
    let (device, crypto) = setup();
    let million_a = vec![b'a'; 1_000_000];
    let messages: [&[u8]; 4] = [b"abc", b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", &million_a, b""];
    let expected = [
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ];
    let digests = crypto.sha256_many_blocking(&messages).unwrap();
    for ((m, d), e) in messages.iter().zip(&digests).zip(expected) {
        assert_eq!(d.to_vec(), unhex(e), "SHA-256 of {} bytes", m.len());
        assert_eq!(cpu_sha256(m).to_vec(), unhex(e), "RustCrypto agrees");
    }
    drop(crypto);
    finish(device);
}

#[test]
fn rfc4231_hmac_sha256_vectors() {
    let (device, crypto) = setup();
    let cases: [(&str, Vec<u8>, Vec<u8>, &str); 7] = [
        ("1", vec![0x0b; 20], b"Hi There".to_vec(), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (
            "2",
            b"Jefe".to_vec(),
            b"what do ya want for nothing?".to_vec(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        ("3", vec![0xaa; 20], vec![0xdd; 50], "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        ("4", (1..=25).collect(), vec![0xcd; 50], "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        // Case 5 specifies only the first 128 bits of the output.
        ("5", vec![0x0c; 20], b"Test With Truncation".to_vec(), "a3b6167473100ee06e0c796c2955552b"),
        (
            "6",
            vec![0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        ),
        (
            "7",
            vec![0xaa; 131],
            b"This is a test using a larger than block-size key and a larger than block-size data. \
              The key needs to be hashed before being used by the HMAC algorithm."
                .to_vec(),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
        ),
    ];
    for (name, key, data, expected) in &cases {
        let expected = unhex(expected);
        let mac = crypto.hmac_sha256_many_blocking(key, &[data]).unwrap();
        assert_eq!(mac.len(), 1);
        assert_eq!(&mac[0][..expected.len()], &expected[..], "RFC 4231 test case {name}");
        assert_eq!(&cpu_hmac(key, data)[..expected.len()], &expected[..], "case {name}: RustCrypto agrees");
    }
    drop(crypto);
    finish(device);
}

// ---------------------------------------------------------------------- against RustCrypto

#[test]
fn aes_ctr_matches_rustcrypto() {
    let (device, crypto) = setup();
    let data = bytes_of_len(prop_oneof![
        2 => proptest::sample::select(vec![0usize, 1, 15, 16, 17, 31, 32, 33]),
        2 => 0usize..2048,
        1 => 0usize..=65536,
    ]);
    check(64, (aes_key(), ctr_iv(), data), |(key, iv, data)| {
        let gpu = crypto.aes_ctr_blocking(&key, &iv, &data).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(gpu.len(), data.len());
        prop_assert!(gpu == cpu_ctr(&key, &iv, &data), "AES-{} CTR differs for {} bytes", key.len() * 8, data.len());
        Ok(())
    });
    drop(crypto);
    finish(device);
}

#[test]
fn sha256_batches_match_rustcrypto() {
    let (device, crypto) = setup();
    // Every edge length once, in one batch (so at every byte alignment the batch creates).
    let edge: Vec<Vec<u8>> =
        EDGE_LENGTHS.iter().chain(&EDGE_LENGTHS).enumerate().map(|(i, &n)| vec![i as u8 ^ 0x5a; n]).collect();
    let gpu = crypto.sha256_many_blocking(&edge).unwrap();
    assert_eq!(gpu, edge.iter().map(|m| cpu_sha256(m)).collect::<Vec<_>>());
    check(48, proptest::collection::vec(message(), 1..12), |msgs| {
        let gpu = crypto.sha256_many_blocking(&msgs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let cpu: Vec<[u8; 32]> = msgs.iter().map(|m| cpu_sha256(m)).collect();
        prop_assert!(gpu == cpu, "SHA-256 differs; lengths {:?}", msgs.iter().map(Vec::len).collect::<Vec<_>>());
        Ok(())
    });
    drop(crypto);
    finish(device);
}

#[test]
fn hmac_sha256_batches_match_rustcrypto() {
    let (device, crypto) = setup();
    let key = bytes_of_len(prop_oneof![proptest::sample::select(vec![0usize, 1, 32, 63, 64, 65, 200]), 0usize..=200]);
    check(48, (key, proptest::collection::vec(message(), 1..10)), |(key, msgs)| {
        let gpu = crypto.hmac_sha256_many_blocking(&key, &msgs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let cpu: Vec<[u8; 32]> = msgs.iter().map(|m| cpu_hmac(&key, m)).collect();
        prop_assert!(
            gpu == cpu,
            "HMAC differs; key {} bytes, lengths {:?}",
            key.len(),
            msgs.iter().map(Vec::len).collect::<Vec<_>>()
        );
        Ok(())
    });
    drop(crypto);
    finish(device);
}

/// CPU model of `encrypt_then_mac`: record `i` starts at the next 16-byte boundary after record
/// `i - 1` in one CTR stream.
fn cpu_encrypt_then_mac(
    aes: &[u8],
    mac: &[u8],
    iv: &[u8; 16],
    records: &[Vec<u8>],
) -> Vec<([u8; 16], Vec<u8>, [u8; 32])> {
    let mut start = 0usize;
    records
        .iter()
        .map(|r| {
            let counter = (u128::from_be_bytes(*iv).wrapping_add((start / 16) as u128)).to_be_bytes();
            let ct = cpu_ctr(aes, &counter, r);
            start = (start + r.len()).next_multiple_of(16);
            let tag = cpu_hmac(mac, &ct);
            (counter, ct, tag)
        })
        .collect()
}

#[test]
fn encrypt_then_mac_matches_cpu() {
    let (device, crypto) = setup();
    let aes = unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
    let records: Vec<Vec<u8>> =
        [0usize, 1, 15, 16, 17, 100, 0, 4096, 55].iter().enumerate().map(|(i, &n)| vec![i as u8 + 1; n]).collect();
    // Near the 2^128 wrap, so the stream's counter wraps inside the batch.
    let iv = (u128::MAX - 3).to_be_bytes();
    let sealed = crypto.encrypt_then_mac_blocking(&aes, b"mac key", &iv, &records).unwrap();
    let cpu = cpu_encrypt_then_mac(&aes, b"mac key", &iv, &records);
    assert_eq!(sealed.len(), records.len());
    for (i, (s, (counter, ct, tag))) in sealed.iter().zip(&cpu).enumerate() {
        assert_eq!(&s.counter, counter, "record {i}");
        assert_eq!(&s.ciphertext, ct, "record {i}");
        assert_eq!(&s.mac, tag, "record {i}");
        // Each record decrypts on its own from its counter.
        assert_eq!(cpu_ctr(&aes, &s.counter, &s.ciphertext), records[i]);
    }
    // All records empty: nothing to encrypt, MACs of empty ciphertexts.
    let sealed = crypto.encrypt_then_mac_blocking(&aes[..16], b"", &iv, &[Vec::new(), Vec::new()]).unwrap();
    assert!(sealed.iter().all(|s| s.ciphertext.is_empty() && s.mac == cpu_hmac(b"", b"")));
    check(
        24,
        (aes_key(), any::<Vec<u8>>(), ctr_iv(), proptest::collection::vec(message(), 1..6)),
        |(aes, mac, iv, recs)| {
            let sealed = crypto
                .encrypt_then_mac_blocking(&aes, &mac, &iv, &recs)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let got: Vec<_> = sealed.into_iter().map(|s| (s.counter, s.ciphertext, s.mac)).collect();
            prop_assert!(got == cpu_encrypt_then_mac(&aes, &mac, &iv, &recs), "encrypt-then-MAC differs");
            Ok(())
        },
    );
    drop(crypto);
    finish(device);
}

// ---------------------------------------------------------------------- splitting and chaining

#[test]
fn splitting_over_many_dispatches_gives_identical_results() {
    let (device, crypto) = setup();
    // One workgroup per dispatch: 256 AES blocks (4 KiB) or 256 messages per dispatch.
    let small = crypto.clone().with_max_groups_per_dispatch(1);
    let key = [0x42u8; 32];
    // Low word of the counter wraps inside the stream (and across a dispatch boundary).
    let iv = iv("000102030405060708090a0bfffff800");
    let data: Vec<u8> = (0..64 * 1024 + 5).map(|i| (i * 7 + i / 256) as u8).collect(); // 4097 blocks: 17 dispatches
    let whole = crypto.aes_ctr_blocking(&key, &iv, &data).unwrap();
    let split = small.aes_ctr_blocking(&key, &iv, &data).unwrap();
    assert!(whole == split, "AES-CTR split over 17 dispatches differs");
    assert!(whole == cpu_ctr(&key, &iv, &data));

    let msgs: Vec<Vec<u8>> = (0..1000usize).map(|i| vec![(i % 251) as u8; i % 130]).collect(); // 4 dispatches
    let whole = crypto.sha256_many_blocking(&msgs).unwrap();
    assert_eq!(small.sha256_many_blocking(&msgs).unwrap(), whole);
    assert_eq!(whole, msgs.iter().map(|m| cpu_sha256(m)).collect::<Vec<_>>());
    let whole = crypto.hmac_sha256_many_blocking(b"k", &msgs).unwrap();
    assert_eq!(small.hmac_sha256_many_blocking(b"k", &msgs).unwrap(), whole);
    assert_eq!(whole, msgs.iter().map(|m| cpu_hmac(b"k", m)).collect::<Vec<_>>());
    drop((crypto, small));
    finish(device);
}

#[test]
fn aes_ctr_agrees_on_the_coalesced_and_device_buffer_kernels() {
    let (device, crypto) = setup();
    // 3000 blocks and a few bytes; the counter's low word wraps inside the stream.
    let iv = iv("00000000000000000000000ffffffa00");
    let data: Vec<u8> = (0..3000 * 16 + 7).map(|i| (i * 13 + i / 511) as u8).collect();
    for key in [vec![0x11u8; 16], vec![0x22; 24], vec![0x33; 32]] {
        let want = cpu_ctr(&key, &iv, &data);
        assert!(crypto.aes_ctr_blocking(&key, &iv, &data).unwrap() == want, "AES-{} default", key.len() * 8);
        // Input that does not start at a word boundary (uploaded through a packed copy).
        let off = cpu_ctr(&key, &iv, &data[1..]);
        assert!(crypto.aes_ctr_blocking(&key, &iv, &data[1..]).unwrap() == off, "AES-{} unaligned", key.len() * 8);
        // Two workgroups per dispatch: the coalesced kernel's blocks split over 6 dispatches.
        let split = crypto.clone().with_max_groups_per_dispatch(2);
        assert!(split.aes_ctr_blocking(&key, &iv, &data).unwrap() == want, "AES-{} split", key.len() * 8);
        // The device-buffer kernel (several blocks per invocation where the data is long).
        let mut cmds = vkasync::CommandList::new(&device);
        let k = vkasync::crypto::AesKey::new(&key).unwrap().upload(&mut cmds).unwrap();
        let buf = vkasync::Buffer::<u32>::from_slice(&device, &vkasync::crypto::pack_le_words(&data, 16)).unwrap();
        crypto.record_aes_ctr(&mut cmds, &k, &iv, &buf, data.len()).unwrap();
        let rb = cmds.read_back(&buf).unwrap();
        cmds.submit_and_wait().unwrap();
        let got = vkasync::crypto::unpack_le_words(&rb.into_vec().unwrap(), data.len());
        assert!(got == want, "AES-{} on a device buffer", key.len() * 8);
    }
    drop(crypto);
    finish(device);
}

#[test]
fn inputs_longer_than_one_buffer_are_split_into_chunks() {
    let (device, crypto) = setup();
    let key = [0x5au8; 16];
    // The counter's low word wraps between chunks 2 and 3.
    let iv = iv("0102030405060708090a0b0cfffffff0");
    let data: Vec<u8> = (0..4 * 1000 + 9).map(|i| (i * 3) as u8).collect();
    // 1000 bytes round down to 992 (62 blocks): 5 chunks, the last partial.
    let chunked = crypto.clone().with_chunk_bytes(1000);
    let before = device.last_submitted();
    assert!(chunked.aes_ctr_blocking(&key, &iv, &data).unwrap() == cpu_ctr(&key, &iv, &data));
    assert_eq!(device.last_submitted(), before + 1, "all chunks in one submission");
    // A chunk of exactly one block.
    let tiny = crypto.clone().with_chunk_bytes(1);
    assert!(tiny.aes_ctr_blocking(&key, &iv, &data[..100]).unwrap() == cpu_ctr(&key, &iv, &data[..100]));

    // Message batches split the same way: at most 992 bytes (and 31 digests) per batch; a
    // message of 992 bytes exactly fills one; one longer than a buffer fails.
    let msgs: Vec<Vec<u8>> = (0..200usize).map(|i| vec![i as u8; (i * 37) % 301]).chain([vec![7; 992]]).collect();
    let before = device.last_submitted();
    let digests = chunked.sha256_many_blocking(&msgs).unwrap();
    assert_eq!(digests, msgs.iter().map(|m| cpu_sha256(m)).collect::<Vec<_>>());
    let macs = chunked.hmac_sha256_many_blocking(b"k", &msgs).unwrap();
    assert_eq!(macs, msgs.iter().map(|m| cpu_hmac(b"k", m)).collect::<Vec<_>>());
    assert_eq!(device.last_submitted(), before + 2, "all batches of a call in one submission");
    let err = chunked.sha256_many_blocking(&[vec![0u8; 10], vec![0u8; 993]]).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    drop((crypto, chunked, tiny));
    finish(device);
}

#[test]
fn device_buffers_chain_in_one_recording() {
    let (device, crypto) = setup();
    let key = [9u8; 16];
    let plaintext: Vec<u8> = (0..1000u32).map(|i| (i * 31) as u8).collect();
    let mut cmds = CommandList::new(&device);
    // One key buffer shared by four dispatches.
    let key_buf = AesKey::new(&key).unwrap().upload(&mut cmds).unwrap();
    let a = Buffer::<u32>::new(&device, 4 * 63, MemoryKind::Device).unwrap(); // 63 blocks >= 1000 bytes
    let b = Buffer::<u32>::new(&device, 4 * 63, MemoryKind::Device).unwrap();
    cmds.upload(&a, &pack_le_words(&plaintext, 16)).unwrap();
    cmds.upload(&b, &pack_le_words(&plaintext, 16)).unwrap();
    let iv_a = [1u8; 16];
    let iv_b = [2u8; 16];
    // a: encrypt, then decrypt again in place (two dispatches writing the same buffer).
    crypto.record_aes_ctr(&mut cmds, &key_buf, &iv_a, &a, plaintext.len()).unwrap();
    crypto.record_aes_ctr(&mut cmds, &key_buf, &iv_a, &a, plaintext.len()).unwrap();
    // b: encrypt, then hash the ciphertext (whole and in overlapping, unaligned pieces) and MAC it.
    crypto.record_aes_ctr(&mut cmds, &key_buf, &iv_b, &b, plaintext.len()).unwrap();
    let ranges: Vec<Range<usize>> = vec![0..1000, 1..2, 3..70, 0..0, 999..1000, 16..16 + 64, 5..998];
    let index = MessageIndex::upload(&mut cmds, &ranges).unwrap();
    let digests = Buffer::<[u32; 8]>::new(&device, ranges.len(), MemoryKind::Device).unwrap();
    let macs = Buffer::<[u32; 8]>::new(&device, ranges.len(), MemoryKind::Device).unwrap();
    crypto.record_sha256(&mut cmds, &b, &index, &digests).unwrap();
    crypto.record_hmac_sha256(&mut cmds, &HmacKey::new(b"chain"), &b, &index, &macs).unwrap();
    let (a_rb, b_rb) = (cmds.read_back(&a).unwrap(), cmds.read_back(&b).unwrap());
    let (d_rb, m_rb) = (cmds.read_back(&digests).unwrap(), cmds.read_back(&macs).unwrap());
    cmds.submit_and_wait().unwrap();

    assert_eq!(unpack_le_words(&a_rb.into_vec().unwrap(), plaintext.len()), plaintext);
    let ct = cpu_ctr(&key, &iv_b, &plaintext);
    assert_eq!(unpack_le_words(&b_rb.into_vec().unwrap(), plaintext.len()), ct);
    let d = d_rb.into_vec().unwrap();
    let m = m_rb.into_vec().unwrap();
    for (i, r) in ranges.iter().enumerate() {
        assert_eq!(digest_bytes(&d[i]), cpu_sha256(&ct[r.clone()]), "SHA-256 of ciphertext range {r:?}");
        assert_eq!(digest_bytes(&m[i]), cpu_hmac(b"chain", &ct[r.clone()]), "HMAC of ciphertext range {r:?}");
    }
    drop((key_buf, a, b, index, digests, macs, crypto));
    finish(device);
}

#[test]
fn results_are_not_ready_before_the_work_completes() {
    let (device, crypto) = setup();
    let key = AesKey::new(&[0; 16]).unwrap();
    let mut cmds = CommandList::new(&device);
    let pending = crypto.prepare_aes_ctr(&mut cmds, &key, &[0; 16], b"not yet").unwrap();
    assert_eq!(pending.finish().unwrap_err(), Error::NotReady);
    let pending = crypto.prepare_sha256_many(&mut cmds, &[b"abc"]).unwrap();
    cmds.submit_and_wait().unwrap();
    assert_eq!(pending.finish().unwrap(), vec![cpu_sha256(b"abc")]);
    drop(crypto);
    finish(device);
}

#[test]
fn empty_inputs_need_no_gpu_work() {
    let (device, crypto) = setup();
    let before = device.last_submitted();
    assert_eq!(crypto.aes_ctr_blocking(&[0; 24], &[0; 16], &[]).unwrap(), Vec::<u8>::new());
    let none: [&[u8]; 0] = [];
    assert_eq!(crypto.sha256_many_blocking(&none).unwrap(), Vec::<[u8; 32]>::new());
    assert_eq!(crypto.hmac_sha256_many_blocking(b"k", &none).unwrap(), Vec::<[u8; 32]>::new());
    assert_eq!(crypto.encrypt_then_mac_blocking(&[0; 16], b"k", &[0; 16], &none).unwrap(), vec![]);
    assert_eq!(device.last_submitted(), before, "nothing was submitted");
    // A batch of empty messages still works (the bytes buffer gets one word).
    let batch = MessageBatch::new(&[b"", b""]).unwrap();
    assert_eq!((batch.words(), batch.byte_len()), (&[0u32][..], 0));
    assert_eq!(crypto.sha256_many_blocking(&[b"", b""]).unwrap(), vec![cpu_sha256(b""); 2]);
    assert_eq!(crypto.hmac_sha256_many_blocking(b"", &[b""]).unwrap(), vec![cpu_hmac(b"", b"")]);
    drop(crypto);
    finish(device);
}

// ---------------------------------------------------------------------- typed errors

fn is_invalid_argument(r: Result<impl std::fmt::Debug, Error>, needle: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(needle), "{msg:?} should mention {needle:?}"),
        other => panic!("expected InvalidArgument({needle:?}), got {other:?}"),
    }
}

#[test]
fn misuse_gives_typed_errors() {
    let (device, crypto) = setup();
    for len in [0usize, 15, 17, 20, 33] {
        is_invalid_argument(AesKey::new(&vec![0; len]), "16, 24 or 32 bytes");
        // The key is checked even when there is no data.
        is_invalid_argument(crypto.aes_ctr_blocking(&vec![0; len], &[0; 16], &[]), &format!("not {len} bytes"));
        is_invalid_argument(crypto.encrypt_then_mac_blocking(&vec![0; len], b"k", &[0; 16], &[b"x"]), "AES key");
    }
    assert_eq!(AesKey::new(&[0; 16]).unwrap().bits(), 128);
    assert_eq!(AesKey::new(&[0; 32]).unwrap().rounds(), 14);
    assert!(!format!("{:?}", AesKey::new(&[0x5a; 16]).unwrap()).contains("5a"), "Debug does not show key bytes");

    is_invalid_argument(MessageBatch::new::<&[u8]>(&[]), "empty message batch");
    let mut cmds = CommandList::new(&device);
    is_invalid_argument(MessageIndex::upload(&mut cmds, &[]), "empty message batch");
    let (start, end) = (5usize, 3usize);
    is_invalid_argument(MessageIndex::upload(&mut cmds, &[0..1, start..end]), "message 1");
    let err = MessageIndex::upload(&mut cmds, &[0..0, 0..(u32::MAX as usize + 1)]).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");

    // AES data longer than the buffer, or not whole blocks.
    let key = AesKey::new(&[0; 16]).unwrap().upload(&mut cmds).unwrap();
    let four = Buffer::<u32>::new(&device, 4, MemoryKind::Device).unwrap();
    let five = Buffer::<u32>::new(&device, 5, MemoryKind::Device).unwrap();
    crypto.record_aes_ctr(&mut cmds, &key, &[0; 16], &four, 16).unwrap();
    crypto.record_aes_ctr(&mut cmds, &key, &[0; 16], &four, 0).unwrap();
    let err = crypto.record_aes_ctr(&mut cmds, &key, &[0; 16], &four, 17).unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { expected: 8, got: 4, .. }), "{err}");
    let err = crypto.record_aes_ctr(&mut cmds, &key, &[0; 16], &five, 17).unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { expected: 8, got: 5, .. }), "{err}");

    // Messages buffer too short for the index; digest buffer too short for the batch.
    let index = MessageIndex::upload(&mut cmds, &[0..4, 2..17]).unwrap();
    assert_eq!((index.len(), index.words_needed()), (2, 5));
    let one_digest = Buffer::<[u32; 8]>::new(&device, 1, MemoryKind::Device).unwrap();
    let two_digests = Buffer::<[u32; 8]>::new(&device, 2, MemoryKind::Device).unwrap();
    let err = crypto.record_sha256(&mut cmds, &four, &index, &two_digests).unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { expected: 5, got: 4, .. }), "{err}");
    let err = crypto.record_hmac_sha256(&mut cmds, &HmacKey::new(b""), &five, &index, &one_digest).unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { expected: 2, got: 1, .. }), "{err}");
    crypto.record_sha256(&mut cmds, &five, &index, &two_digests).unwrap();

    // Pipelines of one device, recorder of another.
    let other = common::device();
    let mut other_cmds = CommandList::new(&other);
    let batch = MessageBatch::new(&[b"abc"]).unwrap().upload(&mut other_cmds).unwrap();
    let digests = Buffer::<[u32; 8]>::new(&other, 1, MemoryKind::Device).unwrap();
    is_invalid_argument(crypto.record_sha256(&mut other_cmds, &batch.bytes, &batch.index, &digests), "another device");
    drop((other_cmds, batch, digests));
    finish(other);

    // Nothing recorded above was submitted; dropping the list releases it all.
    drop((cmds, key, four, five, index, one_digest, two_digests));
    drop(crypto);
    finish(device);
}

#[test]
fn helpers_follow_the_documented_byte_order() {
    // Little-endian packing of byte streams.
    assert_eq!(pack_le_words(&[1, 2, 3, 4, 5], 4), [0x0403_0201, 0x0000_0005]);
    assert_eq!(pack_le_words(&[1; 17], 16).len(), 8);
    assert_eq!(unpack_le_words(&[0x0403_0201, 5], 5), [1, 2, 3, 4, 5]);
    // Big-endian digest words.
    assert_eq!(digest_bytes(&[0x0102_0304, 0, 0, 0, 0, 0, 0, 0x0a0b_0c0d])[..4], [1, 2, 3, 4]);
    // 128-bit big-endian counter arithmetic.
    assert_eq!(ctr_add(&[0xff; 16], 1), [0; 16]);
    assert_eq!(ctr_add(&iv("000000000000000000000000ffffffff"), 1), iv("00000000000000000000000100000000"));
}

#[test]
fn async_functions_run_as_concurrent_tasks_with_one_submit() {
    use aes::cipher::{KeyIvInit, StreamCipher};
    use sha2::Digest;
    let device = common::device();
    let crypto = vkasync::crypto::Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let exec = vkasync::Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let key = [0x42u8; 32];
    let iv = [0xfeu8; 16];
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    let records: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; i * 3]).collect();
    let (c1, ctx1, d1) = (crypto.clone(), exec.context(), data.clone());
    let enc = exec.spawn(async move { c1.aes_ctr(&ctx1, &key, &iv, &d1).await });
    let (c2, ctx2, r2) = (crypto.clone(), exec.context(), records.clone());
    let hash = exec.spawn(async move { c2.sha256_many(&ctx2, &r2).await });
    let (c3, ctx3, r3) = (crypto.clone(), exec.context(), records.clone());
    let mac = exec.spawn(async move { c3.hmac_sha256_many(&ctx3, b"key", &r3).await });
    exec.run();
    let mut want = data.clone();
    ctr::Ctr128BE::<aes::Aes256>::new(&key.into(), &iv.into()).apply_keystream(&mut want);
    assert_eq!(enc.join().unwrap().unwrap(), want);
    let digests = hash.join().unwrap().unwrap();
    for (r, d) in records.iter().zip(&digests) {
        assert_eq!(d[..], sha2::Sha256::digest(r)[..]);
    }
    let macs = mac.join().unwrap().unwrap();
    for (r, m) in records.iter().zip(&macs) {
        use hmac::Mac;
        let mut h = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"key").unwrap();
        h.update(r);
        assert_eq!(m[..], h.finalize().into_bytes()[..]);
    }
    let s = exec.stats();
    assert_eq!((s.await_points, s.submits), (3, 1), "{s}");
    assert!(s.host_waits <= 1, "{s}");
    drop((exec, crypto));
    common::finish(device);
}
